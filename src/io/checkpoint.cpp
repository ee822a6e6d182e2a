#include "numprobe/io/checkpoint.hpp"

#include <set>
#include <system_error>

#include "json_header.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/io/regular_file.hpp"
#include "numprobe/io/safetensors.hpp"

namespace numprobe::io {
namespace {

namespace fs = std::filesystem;

// An index is a few hundred bytes per tensor; 100 MB is far beyond any real model.
constexpr std::uintmax_t k_max_index_bytes = 100'000'000;
constexpr int k_max_index_depth = 4;

// A shard named by an index must stay inside the index's folder: no absolute paths, no
// "..", and no symlink that resolves elsewhere.
fs::path resolve_shard(const fs::path& index, const fs::path& folder, const std::string& rel,
                       const std::string& place) {
  const fs::path p(rel);
  if (rel.empty() || p.is_absolute() || p.has_root_name() || p.has_root_directory()) {
    throw_input_error(place, "shard '" + rel + "' must be a relative path inside the index's folder");
  }
  for (const auto& part : p) {
    if (part == "..") throw_input_error(place, "shard '" + rel + "' points outside the index's folder");
  }
  const fs::path full = folder / p;
  std::error_code ec;
  if (const auto why = why_not_regular(full)) {
    throw_input_error(place, "shard '" + rel + "': " + *why + " (looked for " + full.string() + ")");
  }
  const fs::path real = fs::canonical(full, ec);
  const fs::path real_folder = fs::canonical(folder, ec);
  if (ec) throw_input_error(place, "cannot resolve shard '" + rel + "': " + ec.message());
  auto [a, b] = std::mismatch(real_folder.begin(), real_folder.end(), real.begin(), real.end());
  if (a != real_folder.end()) {
    throw_input_error(place, "shard '" + rel + "' resolves outside the index's folder");
  }
  // A shard is a .safetensors file; an index naming itself (or another index) would otherwise
  // be parsed as safetensors and fail with a meaningless header length.
  if (real == fs::canonical(index, ec)) {
    throw_input_error(place, "shard '" + rel + "' is this index itself (a weight_map must name "
                             ".safetensors shards)");
  }
  if (rel.ends_with(".json")) {
    throw_input_error(place, "shard '" + rel + "' is an index (.json), not a .safetensors shard; "
                             "indexes do not nest");
  }
  return full;
}

}  // namespace

checkpoint checkpoint::open(const fs::path& path) {
  checkpoint c;
  c.m_path = path;
  const std::string place = path.string();
  if (!place.ends_with(".json")) {
    const auto f = safetensors_file::open(path);
    c.m_shards.push_back(path);
    c.m_metadata = f.metadata();
    for (const auto& t : f.tensors()) {
      c.m_by_name.emplace(t.name, c.m_entries.size());
      c.m_entries.push_back({t.name, t.dtype, t.shape, 0});
    }
    return c;
  }
  const auto file = mapped_file::open(path);
  if (file->bytes().size() > k_max_index_bytes) {
    throw_input_error(place, "index larger than " + std::to_string(k_max_index_bytes) + " bytes");
  }
  const auto b = file->bytes();
  const auto j = detail::parse_json_object(
      std::string_view(reinterpret_cast<const char*>(b.data()), b.size()), place,
      k_max_index_depth);
  const auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) throw_input_error(place, "missing object 'weight_map'");
  if (const auto md = j.find("metadata"); md != j.end()) {
    if (!md->is_object()) throw_input_error(place, "'metadata' must be an object");
    for (const auto& [k, v] : md->items()) {
      c.m_metadata.emplace(k, v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::map<std::string, std::size_t> shard_of_file;  // shard file name -> index
  std::map<std::string, std::size_t> wanted;         // tensor -> shard
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) {
      throw_input_error(place, "weight_map entry '" + tensor + "' must name a shard file");
    }
    const auto& rel = shard.get_ref<const std::string&>();
    auto it = shard_of_file.find(rel);
    if (it == shard_of_file.end()) {
      c.m_shards.push_back(resolve_shard(path, folder, rel, place));
      it = shard_of_file.emplace(rel, c.m_shards.size() - 1).first;
    }
    wanted.emplace(tensor, it->second);
  }
  // Validate every shard now, so a pass never fails half way; drop each map right after.
  for (std::size_t s = 0; s < c.m_shards.size(); ++s) {
    const auto f = safetensors_file::open(c.m_shards[s]);
    for (const auto& t : f.tensors()) {
      const auto w = wanted.find(t.name);
      if (w == wanted.end() || w->second != s) continue;  // not this shard's per the index
      c.m_by_name.emplace(t.name, c.m_entries.size());
      c.m_entries.push_back({t.name, t.dtype, t.shape, s});
    }
  }
  for (const auto& [tensor, s] : wanted) {
    if (!c.m_by_name.contains(tensor)) {
      throw_input_error(place, "weight_map names tensor '" + tensor + "' but shard '" +
                                   c.m_shards[s].filename().string() + "' does not hold it");
    }
  }
  return c;
}

tensor_view checkpoint::get(std::string_view name) const {
  const auto it = m_by_name.find(std::string(name));
  if (it == m_by_name.end()) {
    throw_input_error(m_path.string(), "no tensor named '" + std::string(name) + "'");
  }
  const auto f = safetensors_file::open(m_shards[m_entries[it->second].shard]);
  return f.at(name);
}

void checkpoint::for_each(const std::function<void(const tensor_view&)>& fn) const {
  std::size_t i = 0;
  while (i < m_entries.size()) {
    const std::size_t s = m_entries[i].shard;
    const auto f = safetensors_file::open(m_shards[s]);
    for (; i < m_entries.size() && m_entries[i].shard == s; ++i) {
      const tensor_view& v = f.at(m_entries[i].name);
      fn(v);
      const auto offset = static_cast<std::size_t>(v.bytes.data() - f.file()->bytes().data());
      f.file()->release_pages(offset, v.bytes.size());
    }
  }
}

}  // namespace numprobe::io
