#include "numprobe/io/safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "atomic_write.hpp"
#include "json_header.hpp"
#include "numprobe/base/error.hpp"

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
  // A .npy array (--against, --act-stats given one) would otherwise read as a header length of
  // some 10^14 bytes: say what the file is.
  static constexpr char k_npy_magic[] = "\x93NUMPY";
  if (b.size() >= 6 && std::memcmp(b.data(), k_npy_magic, 6) == 0)
    throw_input_error(src, "not a .safetensors file: it starts with the .npy magic \\x93NUMPY (a .npy array, "
                           "where a .safetensors checkpoint is expected)");
  if (b.size() < 8) throw_input_error(src, "file is shorter than the 8-byte header length");
  const std::uint64_t n = read_u64_le(b.data());
  if (n > k_safetensors_max_header_bytes) {
    throw_input_error(src, "header length " + std::to_string(n) + " exceeds the bound of " +
                               std::to_string(k_safetensors_max_header_bytes) +
                               " bytes: not a .safetensors file (its first 8 bytes are no header length)");
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

struct sized_decl {
  tensor_decl decl;
  std::uint64_t bytes = 0;
};

// The header (length field + JSON padded to a multiple of 8) of tensors in their final order
// (widest first, then by name: offsets of wide types stay multiples of their width), which it
// leaves in `tensors`. Validates names and dtypes; sizes from the shapes.
std::vector<std::byte> header_of(std::vector<sized_decl>& tensors,
                                 const std::map<std::string, std::string>& metadata, const std::string& place) {
  std::set<std::string> names;
  for (auto& t : tensors) {
    const std::string tp = place + ":" + t.decl.name;
    if (t.decl.name == k_metadata_key) throw_input_error(tp, "tensor name '__metadata__' is reserved");
    if (!names.insert(t.decl.name).second) throw_input_error(tp, "duplicate tensor name");
    if (info(t.decl.dtype).safetensors.empty()) {
      throw_input_error(tp, "dtype " + std::string(name(t.decl.dtype)) + " has no safetensors name");
    }
    t.bytes = checked_byte_count(t.decl.dtype, checked_element_count(t.decl.shape, tp), tp);
  }
  std::stable_sort(tensors.begin(), tensors.end(), [](const sized_decl& a, const sized_decl& c) {
    return bits(a.decl.dtype) != bits(c.decl.dtype) ? bits(a.decl.dtype) > bits(c.decl.dtype)
                                                    : a.decl.name < c.decl.name;
  });
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    j[k_metadata_key] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) j[k_metadata_key][k] = v;
  }
  std::uint64_t at = 0;
  for (const auto& t : tensors) {
    nlohmann::ordered_json e;
    e["dtype"] = info(t.decl.dtype).safetensors;
    e["shape"] = t.decl.shape;
    e["data_offsets"] = {at, at + t.bytes};
    at += t.bytes;
    j[t.decl.name] = std::move(e);
  }
  std::string text = j.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> header(8 + text.size());
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) header[i] = std::byte((n >> (8 * i)) & 0xFF);
  std::memcpy(header.data() + 8, text.data(), text.size());
  return header;
}

prepared prepare(std::vector<tensor_to_write> tensors,
                 const std::map<std::string, std::string>& metadata, const std::string& place) {
  std::vector<sized_decl> decls;
  std::map<std::string, std::size_t> given;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    decls.push_back({{tensors[i].name, tensors[i].dtype, tensors[i].shape}, 0});
    given.emplace(tensors[i].name, i);
  }
  prepared p;
  p.header = header_of(decls, metadata, place);
  for (const auto& d : decls) {
    auto& t = tensors[given.at(d.decl.name)];
    if (d.bytes != t.bytes.size()) {
      throw_input_error(place + ":" + t.name, "shape x dtype is " + std::to_string(d.bytes) + " bytes, given " +
                                                  std::to_string(t.bytes.size()));
    }
    p.order.push_back(std::move(t));
  }
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

safetensors_stream::safetensors_stream(std::filesystem::path target, std::vector<tensor_decl> tensors,
                                       const std::map<std::string, std::string>& metadata)
    : m_target(std::move(target)) {
  static std::atomic<unsigned> counter{0};
  const std::string place = m_target.string();
  std::vector<sized_decl> decls;
  for (auto& t : tensors) decls.push_back({std::move(t), 0});
  const auto header = header_of(decls, metadata, place);
  for (auto& d : decls) {
    m_total += d.bytes;
    m_order.push_back(std::move(d.decl));
  }
  m_tmp = place + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (m_fd < 0) throw_input_error(place, std::string("cannot create: ") + std::strerror(errno));
  m_total += header.size();
  try {
    write(header);
  } catch (...) {
    ::close(m_fd);
    ::unlink(m_tmp.c_str());
    m_fd = -1;
    throw;
  }
}

safetensors_stream::~safetensors_stream() {
  if (m_fd >= 0) {
    ::close(m_fd);
    ::unlink(m_tmp.c_str());
  }
}

void safetensors_stream::write(std::span<const std::byte> bytes) {
  const std::string place = m_target.string();
  if (m_fd < 0) throw_input_error(place, "written after finish");
  if (bytes.size() > m_total - m_written)
    throw_input_error(place, "more tensor bytes than the header declares");
  const std::byte* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ::ssize_t w = ::write(m_fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw_input_error(place, std::string("cannot write: ") + std::strerror(errno));
    p += w;
    left -= static_cast<std::size_t>(w);
  }
  m_written += bytes.size();
}

void safetensors_stream::finish() {
  const std::string place = m_target.string();
  if (m_fd < 0) throw_input_error(place, "finished twice");
  if (m_written != m_total)
    throw_input_error(place, fmt::format("{} of {} declared bytes written", m_written, m_total));
  const int fd = m_fd;
  m_fd = -1;
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    ::unlink(m_tmp.c_str());
    throw_input_error(place, std::string("cannot flush: ") + std::strerror(e));
  }
  if (::rename(m_tmp.c_str(), place.c_str()) != 0) {
    const int e = errno;
    ::unlink(m_tmp.c_str());
    throw_input_error(place, std::string("cannot rename into place: ") + std::strerror(e));
  }
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
