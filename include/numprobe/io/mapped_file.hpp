#pragma once
// A read-only memory map of a whole file. Tensor views point into it, so reading a
// checkpoint never copies tensor data; the OS pages it in as it is touched.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace numprobe::io {

class mapped_file {
 public:
  // Maps `path` read-only. Throws numprobe::error (exit 2) naming the file when it cannot be
  // opened, is not a regular file, or cannot be mapped. An empty file maps to an empty span.
  static std::shared_ptr<const mapped_file> open(const std::filesystem::path& path);

  // Wraps bytes already in memory (fuzzing, tests); the buffer is copied.
  static std::shared_ptr<const mapped_file> from_bytes(std::span<const std::byte> bytes,
                                                       std::string source);

  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file();

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {m_data, m_size}; }
  [[nodiscard]] const std::string& source() const noexcept { return m_source; }

  // Tells the OS the pages of [offset, offset + length) will not be needed again, so a pass
  // over a checkpoint larger than RAM keeps its resident set bounded. Harmless on a copy.
  void release_pages(std::size_t offset, std::size_t length) const noexcept;

  // Asks the OS to start reading [offset, offset + length) (clamped to the file) in the
  // background, so a pass can compute on one tensor while the next one comes off the disk.
  // Only a hint: harmless on a copy or on pages already resident.
  void will_need(std::size_t offset, std::size_t length) const noexcept;

 private:
  mapped_file() = default;
  const std::byte* m_data = nullptr;
  std::size_t m_size = 0;
  bool m_mapped = false;
  std::unique_ptr<std::byte[]> m_copy;
  std::string m_source;
};

}  // namespace numprobe::io
