#pragma once
// .safetensors files: read through a memory map (tensor views are zero-copy) and write.
//
// Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an object mapping
// tensor names to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
// "__metadata__" object of string values), then the data section. Offsets are relative to
// the data section. As in the reference implementation, tensors must tile the data section
// exactly: no overlaps, no holes, no trailing bytes.
//
// Sub-byte dtypes (F4, F6_E2M3, F6_E3M2): safetensors fixes only the size, nelements x bits / 8,
// which must be whole. We read them as a little-endian bit stream: element i occupies bits
// [b*i, b*i + b) counting from the least significant bit of byte 0. For F4 this is element 2i
// in the low nibble and 2i+1 in the high nibble (NUMERICS.md "Packing", PyTorch's
// float4_e2m1fn_x2); F6 follows the same LSB-first rule (4 codes in 3 bytes).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "numprobe/io/tensor_view.hpp"

namespace numprobe::io {

// The reference implementation's bound on the JSON header (100 MB).
inline constexpr std::uint64_t k_safetensors_max_header_bytes = 100'000'000;

class safetensors_file {
 public:
  // Maps and validates a file. Throws numprobe::error (exit 2) naming the file (and tensor,
  // field) on any violation.
  static safetensors_file open(const std::filesystem::path& path);

  // Validates an image already in memory or mapped.
  static safetensors_file parse(std::shared_ptr<const mapped_file> file);

  // Tensors in data-offset order (the order a sequential pass reads them).
  [[nodiscard]] const std::vector<tensor_view>& tensors() const noexcept { return m_tensors; }

  // nullptr when absent.
  [[nodiscard]] const tensor_view* find(std::string_view name) const;

  // Throws (exit 2) naming the file and the tensor when absent.
  [[nodiscard]] const tensor_view& at(std::string_view name) const;

  [[nodiscard]] const std::map<std::string, std::string>& metadata() const noexcept {
    return m_metadata;
  }
  [[nodiscard]] const std::string& source() const noexcept { return m_file->source(); }
  [[nodiscard]] const std::shared_ptr<const mapped_file>& file() const noexcept { return m_file; }

 private:
  std::shared_ptr<const mapped_file> m_file;
  std::vector<tensor_view> m_tensors;
  std::unordered_map<std::string, std::size_t> m_by_name;  // index into m_tensors
  std::map<std::string, std::string> m_metadata;
};

// One tensor to write: the bytes must match shape x dtype exactly.
struct tensor_to_write {
  std::string name;
  io::dtype dtype = io::dtype::m_f32;
  std::vector<std::uint64_t> shape;
  std::span<const std::byte> bytes;
};

// The header (length field + JSON, padded with spaces to a multiple of 8) that precedes
// the tensors' bytes, laid out in the order written. Tensors are ordered by descending
// alignment then name, as the reference writer does, so wide types stay aligned.
// Throws (exit 2) on duplicate or reserved names, size mismatches and dtypes that
// safetensors cannot name (raw8, unpacked fp6/fp4).
[[nodiscard]] std::vector<std::byte> safetensors_bytes(
    std::vector<tensor_to_write> tensors, const std::map<std::string, std::string>& metadata = {});

// Writes a .safetensors file atomically (temporary file + rename); tensors' bytes are written
// from their spans without an intermediate copy.
void write_safetensors(const std::filesystem::path& path, std::vector<tensor_to_write> tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A .safetensors file written tensor by tensor, for checkpoints larger than memory (convert
// --write): every tensor is declared first, the header goes to a temporary file beside the
// target, then the tensors' bytes come in order() (any split), and finish() flushes and renames
// (atomic, as write_safetensors). A writer destroyed before finish() removes its temporary.
struct tensor_decl {
  std::string name;
  io::dtype dtype = io::dtype::m_f32;
  std::vector<std::uint64_t> shape;
};

class safetensors_stream {
 public:
  // Throws (exit 2) as safetensors_bytes does on the declarations, or naming the target when
  // the temporary cannot be created.
  safetensors_stream(std::filesystem::path target, std::vector<tensor_decl> tensors,
                     const std::map<std::string, std::string>& metadata = {});
  safetensors_stream(const safetensors_stream&) = delete;
  safetensors_stream& operator=(const safetensors_stream&) = delete;
  ~safetensors_stream();

  // The order the bytes must come in (widest dtype first, then by name).
  [[nodiscard]] const std::vector<tensor_decl>& order() const noexcept { return m_order; }
  // Bytes of the data section, continuing where the last call stopped; throws (exit 2) past
  // the declared total.
  void write(std::span<const std::byte> bytes);
  // Throws (exit 2) naming the target when fewer bytes came than declared.
  void finish();

 private:
  std::filesystem::path m_target, m_tmp;
  std::vector<tensor_decl> m_order;
  std::uint64_t m_total = 0, m_written = 0;
  int m_fd = -1;
};

// Convenience: f64 / f32 / u8 tensors from vectors.
[[nodiscard]] tensor_to_write tensor_of(std::string name, std::vector<std::uint64_t> shape,
                                        const std::vector<double>& values);
[[nodiscard]] tensor_to_write tensor_of(std::string name, std::vector<std::uint64_t> shape,
                                        const std::vector<float>& values);
[[nodiscard]] tensor_to_write tensor_of(std::string name, std::vector<std::uint64_t> shape,
                                        const std::vector<std::uint8_t>& values);

}  // namespace numprobe::io
