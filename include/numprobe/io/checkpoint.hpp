#pragma once
// A model checkpoint: one .safetensors file, or a sharded one described by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}).
// Opening validates every shard's header; a pass over the tensors maps one shard at a time
// and hands out zero-copy views, so memory stays bounded by the largest tensor a caller
// chooses to keep, not by the checkpoint.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "numprobe/io/tensor_view.hpp"

namespace numprobe::io {

class checkpoint {
 public:
  // What is known of a tensor without mapping its shard.
  struct entry {
    std::string name;
    io::dtype dtype;
    std::vector<std::uint64_t> shape;
    std::size_t shard;  // index into shards()
  };

  // PATH is a .safetensors file or an index .json. Throws numprobe::error (exit 2) naming
  // the file: malformed index, a shard outside the index's folder or missing, a tensor the
  // index names but its shard lacks, or any shard that fails safetensors validation.
  static checkpoint open(const std::filesystem::path& path);

  // Tensors ordered by shard, then by position in the shard (sequential reads).
  [[nodiscard]] const std::vector<entry>& tensors() const noexcept { return m_entries; }
  [[nodiscard]] const std::vector<std::filesystem::path>& shards() const noexcept {
    return m_shards;
  }
  // The index's "metadata" (values as JSON text when not strings) or the file's __metadata__.
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const noexcept {
    return m_metadata;
  }

  // One tensor by name; the view keeps its shard mapped. Throws (exit 2) when absent.
  [[nodiscard]] tensor_view get(std::string_view name) const;

  // Calls fn on every tensor in tensors() order. After fn returns, the tensor's pages are
  // released and a shard is unmapped when the pass leaves it (unless fn kept a view).
  void for_each(const std::function<void(const tensor_view&)>& fn) const;

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return m_path; }

 private:
  std::filesystem::path m_path;
  std::vector<std::filesystem::path> m_shards;
  std::vector<entry> m_entries;
  std::map<std::string, std::size_t> m_by_name;  // index into m_entries
  std::map<std::string, std::string> m_metadata;
};

}  // namespace numprobe::io
