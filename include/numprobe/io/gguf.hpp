#pragma once
// GGUF files (llama.cpp's model format, versions 2 and 3), read through a memory map and decoded
// to exact values (issue 29).
//
// Layout (ggml's gguf.cpp and gguf-py's GGUFReader; docs/checkpoints.md "GGUF"), little-endian:
//   magic "GGUF" (4 bytes) | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | n_dims x u64 ne | u32 ggml_type | u64 offset }
//   padding to `general.alignment` (u32 key, default 32, a power of two)
//   data section: each tensor at data_start + offset, offset a multiple of the alignment
// A string is a u64 byte length then that many bytes (not NUL-terminated). ne[0] is the
// innermost (contiguous) dimension: a ggml tensor with ne = [K, N] is the row-major [N, K]
// matrix of PyTorch, N rows of K elements. Quantized types store each row as ne[0] / block_size
// blocks, so ne[0] must be a multiple of the type's block size.
//
// Every size read from the file is checked before anything is allocated or touched: counts
// against the bytes that remain, string lengths, n_dims <= 4, element-count products that
// overflow, unknown value or tensor types, offsets off the alignment or past the end, tensors
// that overlap, duplicate names and keys. A violation throws numprobe::error (exit 2) naming the
// file and the field or tensor.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "numprobe/io/mapped_file.hpp"

namespace numprobe::io {

// ggml's type numbers (ggml.h enum ggml_type; gguf-py constants.GGMLQuantizationType).
enum class ggml_type : std::uint32_t {
  m_f32 = 0,
  m_f16 = 1,
  m_q4_0 = 2,
  m_q4_1 = 3,
  m_q5_0 = 6,
  m_q5_1 = 7,
  m_q8_0 = 8,
  m_q8_1 = 9,
  m_q2_k = 10,
  m_q3_k = 11,
  m_q4_k = 12,
  m_q5_k = 13,
  m_q6_k = 14,
  m_q8_k = 15,
  m_iq2_xxs = 16,
  m_iq2_xs = 17,
  m_iq3_xxs = 18,
  m_iq1_s = 19,
  m_iq4_nl = 20,
  m_iq3_s = 21,
  m_iq2_s = 22,
  m_iq4_xs = 23,
  m_i8 = 24,
  m_i16 = 25,
  m_i32 = 26,
  m_i64 = 27,
  m_f64 = 28,
  m_iq1_m = 29,
  m_bf16 = 30,
  m_tq1_0 = 34,
  m_tq2_0 = 35,
  m_mxfp4 = 39,
  m_nvfp4 = 40,
  m_q1_0 = 41,
};

struct ggml_type_info {
  ggml_type id;
  std::string_view name;     // ggml's name: "F32", "Q4_K", "IQ4_NL", "MXFP4", ...
  std::int64_t block_size;   // elements per block (1 for the plain types)
  std::int64_t type_size;    // bytes per block
  bool decodes;              // numprobe decodes it to exact values (the list)
};

// The info of a known type number; nullopt for a number ggml does not define.
[[nodiscard]] std::optional<ggml_type_info> find_ggml_type(std::uint32_t number);
[[nodiscard]] const ggml_type_info& info(ggml_type t);

// GGUF metadata value types (gguf.h enum gguf_type).
enum class gguf_value_type : std::uint32_t {
  m_u8 = 0, m_i8 = 1, m_u16 = 2, m_i16 = 3, m_u32 = 4, m_i32 = 5, m_f32 = 6, m_bool = 7,
  m_string = 8, m_array = 9, m_u64 = 10, m_i64 = 11, m_f64 = 12,
};

// One metadata value. Arrays hold elements of one type (nested arrays are refused: ggml
// refuses them too). Large arrays (a tokenizer's 49,152 strings) are kept as they are.
struct gguf_value {
  gguf_value_type type{};
  // Scalars: integers widened (signed into i64, unsigned into u64), floats into double.
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string> scalar;
  gguf_value_type array_type{};           // when type == m_array
  std::vector<gguf_value> array;          // when type == m_array (elements have no array)

  // Text for reports: scalars as they are; arrays as "[type x N]" plus the first elements.
  [[nodiscard]] std::string summary(std::size_t max_elements = 4) const;
  // The value as an unsigned integer when it is a non-negative integer scalar.
  [[nodiscard]] std::optional<std::uint64_t> as_u64() const;
  [[nodiscard]] const std::string* as_string() const;
};

struct gguf_tensor {
  std::string name;
  ggml_type type{};
  std::vector<std::uint64_t> ne;     // ggml order: ne[0] innermost; 1..4 entries
  std::uint64_t offset = 0;          // relative to the data section
  std::uint64_t bytes = 0;           // nelements / block_size * type_size
  // The shape as PyTorch and safetensors hold it: ne reversed ([N, K] for ne = [K, N]).
  [[nodiscard]] std::vector<std::uint64_t> shape() const;
  [[nodiscard]] std::uint64_t elements() const;
  // Rows and columns of the logical matrix: cols = ne[0], rows = the product of the rest.
  [[nodiscard]] std::int64_t cols() const { return static_cast<std::int64_t>(ne.at(0)); }
  [[nodiscard]] std::int64_t rows() const;
};

class gguf_file {
 public:
  // Maps and validates a file. Throws numprobe::error (exit 2) naming the file on any violation.
  static gguf_file open(const std::filesystem::path& path);
  // Validates an image already in memory or mapped (fuzzing, tests).
  static gguf_file parse(std::shared_ptr<const mapped_file> file);

  // Whether PATH is a regular file whose first four bytes are "GGUF" (false for a missing or short
  // file, and for a FIFO or device, which is never opened here).
  [[nodiscard]] static bool has_magic(const std::filesystem::path& path);

  [[nodiscard]] std::uint32_t version() const noexcept { return m_version; }
  [[nodiscard]] std::uint64_t alignment() const noexcept { return m_alignment; }
  [[nodiscard]] std::uint64_t data_start() const noexcept { return m_data_start; }
  // Keys in file order.
  [[nodiscard]] const std::vector<std::pair<std::string, gguf_value>>& metadata() const noexcept {
    return m_kv;
  }
  [[nodiscard]] const gguf_value* find_key(std::string_view key) const;
  // Tensors in file (tensor-info) order.
  [[nodiscard]] const std::vector<gguf_tensor>& tensors() const noexcept { return m_tensors; }
  [[nodiscard]] const gguf_tensor* find(std::string_view name) const;

  // The stored bytes of t (one of tensors()).
  [[nodiscard]] std::span<const std::byte> data(const gguf_tensor& t) const;

  // Rows [r0, r1) of t decoded to float32, row-major [r1 - r0, cols], exactly as gguf-py's
  // gguf.quants.dequantize computes them (bit for bit). Throws (exit 2) naming the tensor and
  // its type when the type is not one numprobe decodes, or r0/r1 out of range.
  [[nodiscard]] std::vector<float> decode_rows(const gguf_tensor& t, std::int64_t r0,
                                               std::int64_t r1) const;

  // Hands t's pages back to the kernel (they stay readable).
  void release_pages(const gguf_tensor& t) const noexcept;

  [[nodiscard]] const std::string& source() const noexcept { return m_file->source(); }
  [[nodiscard]] const std::shared_ptr<const mapped_file>& file() const noexcept { return m_file; }

 private:
  std::shared_ptr<const mapped_file> m_file;
  std::uint32_t m_version = 0;
  std::uint64_t m_alignment = 32;
  std::uint64_t m_data_start = 0;
  std::vector<std::pair<std::string, gguf_value>> m_kv;
  std::vector<gguf_tensor> m_tensors;
  std::unordered_map<std::string, std::size_t> m_by_name;
};

// Block decoders (src/io/gguf_quants.cpp): `blocks` holds whole blocks of `type`; writes
// blocks.size() / type_size * block_size floats to `out` (out.size() must be that). Values are
// gguf-py's dequantize bit for bit: the same float32 operations in the same order (ggml's
// dequantize_row_* in ggml-quants.c, which gguf-py mirrors). Throws (exit 2) for a type that
// does not decode, naming it.
void dequantize_blocks(ggml_type type, std::span<const std::byte> blocks, std::span<float> out);

}  // namespace numprobe::io
