#pragma once
// Element number formats: their facts, and bit-exact encode/decode/round.
// This layer knows nothing else of numprobe (DESIGN.md, "layers").
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace numprobe::formats {

enum class format_id : std::uint8_t {
  m_f64,
  m_f32,
  m_tf32,
  m_bf16,
  m_f16,
  m_e4m3fn,
  m_e4m3fnuz,
  m_e5m2,
  m_e5m2fnuz,
  m_e2m3,
  m_e3m2,
  m_e2m1,
  m_e8m0,
  m_i8,
  m_i4,
  m_u4,
};

enum class rounding : std::uint8_t {
  m_nearest_even,  // IEEE round-to-nearest, ties to even (the default everywhere)
  m_toward_zero,
  m_stochastic,    // round up with probability equal to the discarded fraction
};

// What happens to a finite value whose rounded magnitude exceeds the format's max.
enum class overflow : std::uint8_t {
  m_saturate,  // clamp to +-max finite (CUDA __NV_SATFINITE, fp4/fp6 conversions)
  m_nan,       // produce NaN (ml_dtypes for e4m3fn/fnuz; CUDA __NV_NOSAT for e4m3)
  m_inf,       // produce +-inf (IEEE formats; only where the format has inf)
  m_format_default,  // the format's own convention (see format_info::default_overflow)
};

enum class nan_style : std::uint8_t {
  m_none,        // no NaN encoding (fp4, fp6, integers)
  m_ieee,        // exponent all ones, mantissa != 0
  m_fn,          // exponent and mantissa all ones only (e4m3fn: 0x7F, 0xFF)
  m_fnuz,        // 0x80 only (the would-be negative zero); no -0
  m_all_ones,    // e8m0: 0xFF
};

struct format_info {
  format_id id;
  std::string_view name;
  int bits;            // bits of information (tf32: 19)
  int storage_bits;    // bits it occupies in memory (tf32: 32, fp4: 4)
  int exponent_bits;   // 0 for integers
  int mantissa_bits;   // explicit fraction bits; value bits for integers
  int bias;
  bool is_float;
  bool is_signed;
  bool has_inf;
  nan_style nan;
  double max_finite;
  double min_normal;     // integers: 1
  double min_subnormal;  // 0 when the format has no subnormals (e8m0)
  double lowest;         // most negative finite value (0 for unsigned)
  overflow default_overflow;
};

[[nodiscard]] std::span<const format_info> all_formats();
[[nodiscard]] const format_info& info(format_id id);
[[nodiscard]] std::string_view name(format_id id);

// Accepts canonical names and common aliases (bfloat16, fp8_e4m3fn, float8_e4m3fn, fp4, ...).
// Throws numprobe::error (exit 2) naming `place` (a flag or field) on an unknown name.
[[nodiscard]] format_id parse_format(std::string_view text, const std::string& place = "format");

// Unit roundoff u = 2^-(p) where p = mantissa_bits + 1 (relative half-ulp of RNE).
[[nodiscard]] double unit_roundoff(format_id id);

// Round a double to the nearest value of the format (exactly, no double rounding).
// `random_bits` feeds stochastic rounding (uniform 64-bit value); ignored otherwise.
[[nodiscard]] double round_to(format_id id, double x, rounding r = rounding::m_nearest_even,
                              overflow o = overflow::m_format_default,
                              std::uint64_t random_bits = 0);

// Fast exact RNE paths from float for the formats kernels keep state in (f32, tf32, bf16, f16);
// other formats fall back to round_to. Overflow follows the format default.
[[nodiscard]] float round_float_to(format_id id, float x);

// Encode to the format's code (low `storage_bits` bits of the result).
[[nodiscard]] std::uint32_t encode(format_id id, double x, rounding r = rounding::m_nearest_even,
                                   overflow o = overflow::m_format_default,
                                   std::uint64_t random_bits = 0);

// Decode a code exactly to double. Bits above storage_bits are ignored.
[[nodiscard]] double decode(format_id id, std::uint32_t code);

}  // namespace numprobe::formats
