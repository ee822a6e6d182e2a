#pragma once
// Element number formats: their facts, and bit-exact encode/decode/round.
// This layer knows nothing else of numprobe (DESIGN.md, "layers").
#include <cstdint>
#include <optional>
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

// Conventions of every codec below (each one checked against ml_dtypes 0.6 by
// scripts/oracle/check_formats.py; differences are deliberate and listed there and here):
// - Rounding is exact from double: one rounding of the real input, never through float.
//   (ml_dtypes casts float64 -> float32 -> target, a double rounding; we do not.)
// - RNE ties go to the even significand. For e8m0 (0 mantissa bits) the significand of a
//   normal value is always 1 (odd), so ties such as 1.5 and 3 go up to the next power of two
//   (ml_dtypes does the same).
// - Overflow is decided on the value rounded with an unbounded exponent (IEEE 754), so
//   e4m3fn 464 -> 448 (a tie, 448 is even) and 465 -> 480 -> overflow.
// - An input +-inf is an overflow: saturate gives +-max, nan gives NaN, inf gives +-inf.
//   Under toward-zero, the inf policy gives +-max for finite inputs (IEEE roundTowardZero).
// - NaN input: formats with NaN give their NaN, keeping the sign where the format has one
//   (e4m3fn 0x7F/0xFF, e5m2 0x7E/0xFE, bf16 0x7FC0/0xFFC0; fnuz 0x80; e8m0 0xFF). Formats
//   without NaN (fp6, fp4) give a zero of the *opposite* sign (+NaN -> -0), bit for bit as
//   ml_dtypes does; integers give 0. Callers that must not hide NaN count NaN inputs first.
// - fnuz formats have no -0: -0 and negative values that round to zero give +0 (0x00).
// - e8m0 is unsigned with no zero: NaN, zero and every negative input give NaN (0xFF), as in
//   ml_dtypes; positive values below 2^-127 give 2^-127 (0x00) under every rounding mode.
//   (ml_dtypes rounds float32 inputs in (2^-127, 2^-126), which are fp32 subnormals, up to
//   2^-126 even when much nearer 2^-127; we round them to nearest.)
// - Integers round then saturate to [lowest, max] whatever the overflow policy (the
//   quantization convention clamp(round(x))); ml_dtypes' int4 cast truncates and wraps, so
//   integers are checked against numpy's clip(rint(x)) instead.

// Round a double to the nearest value of the format (exactly, no double rounding).
// `random_bits` feeds stochastic rounding (uniform 64-bit value); ignored otherwise.
// Stochastic rounding rounds away from zero with probability exactly (discarded part)/ulp,
// resolved to 2^-64, so it is unbiased: E[round_to(x)] = x for in-range x.
[[nodiscard]] double round_to(format_id id, double x, rounding r = rounding::m_nearest_even,
                              overflow o = overflow::m_format_default,
                              std::uint64_t random_bits = 0);

// Fast exact RNE paths from float for the formats kernels keep state in (f32, tf32, bf16, f16);
// other formats fall back to round_to. Overflow follows the format default. Equal to
// static_cast<float>(round_to(id, x)) for every float x (tested).
[[nodiscard]] float round_float_to(format_id id, float x);

// Encode to the format's code (low `storage_bits` bits of the result). tf32 codes are the
// fp32 bit pattern with the low 13 bits zero. f64 has no 32-bit code: throws numprobe::error.
[[nodiscard]] std::uint32_t encode(format_id id, double x, rounding r = rounding::m_nearest_even,
                                   overflow o = overflow::m_format_default,
                                   std::uint64_t random_bits = 0);

// Decode a code exactly to double. Bits above storage_bits are ignored. f64 throws.
[[nodiscard]] double decode(format_id id, std::uint32_t code);

// True when `code` decodes to NaN.
[[nodiscard]] bool is_nan_code(format_id id, std::uint32_t code);

// The codes a format uses for its specials, for listings. Absent where the format has none.
struct special_codes {
  std::optional<std::uint32_t> pos_inf, neg_inf;
  std::optional<std::uint32_t> nan;           // the NaN encode() produces for a +NaN input
  std::optional<std::uint32_t> neg_nan;       // ... for a -NaN input (fnuz, e8m0: same code)
  std::optional<std::uint32_t> neg_zero;      // absent in fnuz, e8m0 and unsigned formats
  std::uint32_t max_finite = 0;
};
[[nodiscard]] special_codes specials(format_id id);

// Counter-based random bits for stochastic rounding of element `index` under `seed`
// (splitmix64 of the pair), so any element can be regenerated alone.
[[nodiscard]] std::uint64_t stochastic_bits(std::uint64_t seed, std::uint64_t index);

struct codec_options {
  rounding round = rounding::m_nearest_even;
  overflow over = overflow::m_format_default;
  std::uint64_t seed = 0;  // stochastic rounding: element i uses stochastic_bits(seed, i)
};

// Bulk codecs (encode from double and from float; float inputs are exact in double, so the
// result is the same as encoding static_cast<double>(x)). Spans must have equal sizes.
void encode_many(format_id id, std::span<const double> in, std::span<std::uint32_t> out,
                 const codec_options& opt = {});
void encode_many(format_id id, std::span<const float> in, std::span<std::uint32_t> out,
                 const codec_options& opt = {});
void decode_many(format_id id, std::span<const std::uint32_t> in, std::span<double> out);

}  // namespace numprobe::formats
