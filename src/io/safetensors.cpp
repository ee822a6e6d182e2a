#include "numprobe/io/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "atomic_write.hpp"
#include "json_header.hpp"
#include "numprobe/core/error.hpp"

namespace numprobe::io {
namespace {

constexpr const char* k_metadata_key = "__metadata__";
// Top-level object, tensor object, shape array: nothing legitimate nests deeper.
constexpr int k_max_depth = 3;

std::uint64_t read_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

std::uint64_t get_u64(const nlohmann::json& v, const std::string& place, const char* field) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) throw_input_error(place, std::string("negative value in '") + field + "'");
  throw_input_error(place, std::string("'") + field + "' must hold non-negative integers");
}

struct entry {
  tensor_view view;
  std::uint64_t begin;
  std::uint64_t end;
};

}  // namespace

safetensors_file safetensors_file::parse(std::shared_ptr<const mapped_file> file) {
  const std::string& src = file->source();
  const auto b = file->bytes();
  if (b.size() < 8) throw_input_error(src, "file is shorter than the 8-byte header length");
  const std::uint64_t n = read_u64_le(b.data());
  if (n > k_safetensors_max_header_bytes) {
    throw_input_error(src, "header length " + std::to_string(n) + " exceeds the bound of " +
                               std::to_string(k_safetensors_max_header_bytes) + " bytes");
  }
  if (n > b.size() - 8) {
    throw_input_error(src, "header length " + std::to_string(n) + " runs past the end of the " +
                               std::to_string(b.size()) + "-byte file");
  }
  const std::string_view text(reinterpret_cast<const char*>(b.data() + 8), n);
  const nlohmann::json j = detail::parse_json_object(text, src, k_max_depth);
  const auto data = b.subspan(8 + n);

  safetensors_file out;
  std::vector<entry> entries;
  for (const auto& [key, value] : j.items()) {
    if (key == k_metadata_key) {
      if (!value.is_object()) throw_input_error(src, "'__metadata__' must be an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          throw_input_error(src, "'__metadata__' value of '" + mk + "' must be a string");
        }
        out.m_metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    const std::string place = src + ":" + key;
    if (!value.is_object()) throw_input_error(place, "tensor entry must be an object");
    const auto dt = value.find("dtype");
    const auto sh = value.find("shape");
    const auto off = value.find("data_offsets");
    if (dt == value.end() || !dt->is_string()) throw_input_error(place, "missing string 'dtype'");
    if (sh == value.end() || !sh->is_array()) throw_input_error(place, "missing array 'shape'");
    if (off == value.end() || !off->is_array() || off->size() != 2) {
      throw_input_error(place, "'data_offsets' must be [begin, end]");
    }
    const auto& dname = dt->get_ref<const std::string&>();
    const auto type = from_safetensors_name(dname);
    if (!type) throw_input_error(place, "unknown dtype '" + dname + "'");
    entry e;
    e.view.name = key;
    e.view.dtype = *type;
    e.view.source = src;
    e.view.shape.reserve(sh->size());
    for (const auto& d : *sh) e.view.shape.push_back(get_u64(d, place, "shape"));
    e.begin = get_u64((*off)[0], place, "data_offsets");
    e.end = get_u64((*off)[1], place, "data_offsets");
    if (e.begin > e.end) throw_input_error(place, "data_offsets begin > end");
    if (e.end > data.size()) {
      throw_input_error(place, "data_offsets end " + std::to_string(e.end) +
                                   " is outside the " + std::to_string(data.size()) +
                                   "-byte data section");
    }
    const std::uint64_t want =
        checked_byte_count(*type, checked_element_count(e.view.shape, place), place);
    if (want != e.end - e.begin) {
      throw_input_error(place, "shape x dtype is " + std::to_string(want) +
                                   " bytes but data_offsets span " +
                                   std::to_string(e.end - e.begin));
    }
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const entry& a, const entry& c) {
    return a.begin != c.begin ? a.begin < c.begin : a.end < c.end;
  });
  // Tensors must tile the data section: each starts where the previous one ended.
  std::uint64_t at = 0;
  const entry* prev = nullptr;
  for (const auto& e : entries) {
    if (e.begin < at) {
      throw_input_error(src + ":" + e.view.name,
                        "data_offsets overlap tensor '" + prev->view.name + "'");
    }
    if (e.begin > at) {
      throw_input_error(src + ":" + e.view.name,
                        "hole of " + std::to_string(e.begin - at) +
                            " bytes before this tensor in the data section");
    }
    at = e.end;
    prev = &e;
  }
  if (at != data.size()) {
    throw_input_error(src, std::to_string(data.size() - at) +
                               " bytes after the last tensor (truncated header or stray data)");
  }
  out.m_tensors.reserve(entries.size());
  for (auto& e : entries) {
    e.view.bytes = data.subspan(e.begin, e.end - e.begin);
    e.view.owner = file;
    out.m_by_name.emplace(e.view.name, out.m_tensors.size());
    out.m_tensors.push_back(std::move(e.view));
  }
  out.m_file = std::move(file);
  return out;
}

safetensors_file safetensors_file::open(const std::filesystem::path& path) {
  return parse(mapped_file::open(path));
}

const tensor_view* safetensors_file::find(std::string_view name) const {
  const auto it = m_by_name.find(std::string(name));
  return it == m_by_name.end() ? nullptr : &m_tensors[it->second];
}

const tensor_view& safetensors_file::at(std::string_view name) const {
  if (const auto* t = find(name)) return *t;
  throw_input_error(source(), "no tensor named '" + std::string(name) + "'");
}

namespace {

struct prepared {
  std::vector<std::byte> header;
  std::vector<tensor_to_write> order;
};

prepared prepare(std::vector<tensor_to_write> tensors,
                 const std::map<std::string, std::string>& metadata, const std::string& place) {
  std::set<std::string> names;
  for (const auto& t : tensors) {
    const std::string tp = place + ":" + t.name;
    if (t.name == k_metadata_key) throw_input_error(tp, "tensor name '__metadata__' is reserved");
    if (!names.insert(t.name).second) throw_input_error(tp, "duplicate tensor name");
    if (info(t.dtype).safetensors.empty()) {
      throw_input_error(tp, "dtype " + std::string(name(t.dtype)) + " has no safetensors name");
    }
    const std::uint64_t want =
        checked_byte_count(t.dtype, checked_element_count(t.shape, tp), tp);
    if (want != t.bytes.size()) {
      throw_input_error(tp, "shape x dtype is " + std::to_string(want) + " bytes, given " +
                                std::to_string(t.bytes.size()));
    }
  }
  // Widest first, then by name: offsets of wide types stay multiples of their width.
  std::sort(tensors.begin(), tensors.end(), [](const tensor_to_write& a, const tensor_to_write& c) {
    return bits(a.dtype) != bits(c.dtype) ? bits(a.dtype) > bits(c.dtype) : a.name < c.name;
  });
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    j[k_metadata_key] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) j[k_metadata_key][k] = v;
  }
  std::uint64_t at = 0;
  for (const auto& t : tensors) {
    nlohmann::ordered_json e;
    e["dtype"] = info(t.dtype).safetensors;
    e["shape"] = t.shape;
    e["data_offsets"] = {at, at + t.bytes.size()};
    at += t.bytes.size();
    j[t.name] = std::move(e);
  }
  std::string text = j.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  prepared p;
  p.header.resize(8 + text.size());
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) p.header[i] = std::byte((n >> (8 * i)) & 0xFF);
  std::memcpy(p.header.data() + 8, text.data(), text.size());
  p.order = std::move(tensors);
  return p;
}

template <class T>
tensor_to_write make(std::string name, std::vector<std::uint64_t> shape, const std::vector<T>& v,
                     dtype type) {
  return {std::move(name), type, std::move(shape), std::as_bytes(std::span<const T>(v))};
}

}  // namespace

std::vector<std::byte> safetensors_bytes(std::vector<tensor_to_write> tensors,
                                         const std::map<std::string, std::string>& metadata) {
  auto p = prepare(std::move(tensors), metadata, "safetensors");
  for (const auto& t : p.order) p.header.insert(p.header.end(), t.bytes.begin(), t.bytes.end());
  return std::move(p.header);
}

void write_safetensors(const std::filesystem::path& path, std::vector<tensor_to_write> tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto p = prepare(std::move(tensors), metadata, path.string());
  std::vector<std::span<const std::byte>> parts{std::span<const std::byte>(p.header)};
  for (const auto& t : p.order) parts.push_back(t.bytes);
  detail::atomic_write(path, parts);
}

tensor_to_write tensor_of(std::string name, std::vector<std::uint64_t> shape,
                          const std::vector<double>& values) {
  return make(std::move(name), std::move(shape), values, dtype::m_f64);
}
tensor_to_write tensor_of(std::string name, std::vector<std::uint64_t> shape,
                          const std::vector<float>& values) {
  return make(std::move(name), std::move(shape), values, dtype::m_f32);
}
tensor_to_write tensor_of(std::string name, std::vector<std::uint64_t> shape,
                          const std::vector<std::uint8_t>& values) {
  return make(std::move(name), std::move(shape), values, dtype::m_u8);
}

}  // namespace numprobe::io
