#pragma once
// Element types of tensor files (.npy, .safetensors) and their mapping to number formats.
// A file dtype says how elements are laid out in bytes; a formats::format_id says what a
// code is worth. They differ: files also hold integers, bool, packed sub-byte codes and
// opaque bytes whose meaning the file does not record.
#include <cstdint>
#include <optional>
#include <string_view>

#include "numprobe/formats/format.hpp"

namespace numprobe::io {

enum class dtype : std::uint8_t {
  m_f64,
  m_f32,
  m_f16,
  m_bf16,
  m_e4m3fn,
  m_e4m3fnuz,
  m_e5m2,
  m_e5m2fnuz,
  m_e8m0,
  m_e2m3,         // one fp6 code per byte, in the low 6 bits (ml_dtypes layout)
  m_e3m2,         // one fp6 code per byte, in the low 6 bits (ml_dtypes layout)
  m_e2m1,         // one fp4 code per byte, in the low 4 bits (ml_dtypes layout)
  m_e2m3_packed,  // safetensors F6_E2M3: 6-bit fields, LSB-first bit stream
  m_e3m2_packed,  // safetensors F6_E3M2: 6-bit fields, LSB-first bit stream
  m_e2m1_packed,  // safetensors F4: element 2i in the low nibble, 2i+1 in the high nibble
  m_i64,
  m_i32,
  m_i16,
  m_i8,
  m_u64,
  m_u32,
  m_u16,
  m_u8,
  m_bool,
  m_raw8,  // an opaque byte: .npy '<V1', which ml_dtypes writes for every 8-bit float type
};

struct dtype_info {
  dtype id;
  std::string_view name;         // our name, as printed in errors and reports
  std::string_view safetensors;  // the safetensors dtype string; empty when it has none
  int bits;                      // storage bits per element (packed: 4 or 6)
  std::optional<formats::format_id> format;  // the number format of a code, when there is one
};

[[nodiscard]] const dtype_info& info(dtype id);
[[nodiscard]] std::string_view name(dtype id);
[[nodiscard]] int bits(dtype id);

// Packed dtypes store several elements per byte. A packed tensor's bit count must be a
// whole number of bytes (safetensors' rule); there is no padding to round up to.
[[nodiscard]] bool is_packed(dtype id);

// The safetensors dtype string ("BF16", "F8_E4M3", "F4", ...) to a dtype; nullopt when unknown.
[[nodiscard]] std::optional<dtype> from_safetensors_name(std::string_view text);

// Our name or a safetensors name or a format name (bf16, e4m3fn, F8_E4M3, float32, ...);
// throws numprobe::error (exit 2) naming `place` when unknown.
[[nodiscard]] dtype parse_dtype(std::string_view text, const std::string& place = "dtype");

// The one-code-per-byte (or wider) dtype that stores codes of a format; nullopt for formats
// that files do not store (tf32, int4, uint4).
[[nodiscard]] std::optional<dtype> from_format(formats::format_id id);

}  // namespace numprobe::io
