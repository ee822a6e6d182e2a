// Bit-exact element codecs: round a double to a format's grid, encode it to a code, decode a
// code. The conventions are listed in format.hpp; the oracle is scripts/oracle/check_formats.py.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"
#include "src/formats/fast_codec.hpp"

namespace numprobe::formats {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

// The overflow policy actually applied: a policy the format cannot express falls back to the
// nearest one it can (inf -> NaN -> saturate).
overflow resolve(const format_info& f, overflow o) {
  if (o == overflow::m_format_default) o = f.default_overflow;
  if (o == overflow::m_inf && !f.has_inf) o = overflow::m_nan;
  if (o == overflow::m_nan && f.nan == nan_style::m_none) o = overflow::m_saturate;
  return o;
}

// The magnitude an overflowing value becomes (the caller applies the sign).
double overflow_magnitude(const format_info& f, overflow o, rounding r, bool input_was_inf) {
  switch (resolve(f, o)) {
    case overflow::m_saturate: return f.max_finite;
    case overflow::m_inf:
      // IEEE 754 7.4: roundTowardZero carries a finite overflow to the largest finite value.
      return (r == rounding::m_toward_zero && !input_was_inf) ? f.max_finite : k_inf;
    default: return k_nan;
  }
}

// Round positive finite a > 0 to a multiple of 2^qe (qe = quantum exponent), exactly, with
// integer arithmetic on the double's significand, so there is no intermediate rounding.
// Returns the rounded multiple count; the value is count * 2^qe.
std::uint64_t round_to_quantum(double a, int qe, rounding r, std::uint64_t random_bits) {
  const auto u = std::bit_cast<std::uint64_t>(a);
  const int biased = static_cast<int>(u >> 52);
  std::uint64_t m = u & ((std::uint64_t{1} << 52) - 1);
  if (biased != 0) m |= std::uint64_t{1} << 52;
  const int lsb_exp = (biased == 0 ? 1 : biased) - 1075;  // exponent of the significand's lsb
  const int s = qe - lsb_exp;                             // bits to discard
  if (s <= 0) return m << -s;  // already on the grid (the caller's range keeps this < 2^63)
  std::uint64_t q = 0, rem = m;
  if (s < 64) {
    q = m >> s;
    rem = m & ((std::uint64_t{1} << s) - 1);
  }
  if (rem == 0) return q;
  switch (r) {
    case rounding::m_toward_zero: return q;
    case rounding::m_stochastic: {
      // Up with probability rem / 2^s: compare with the top s random bits (exact for s <= 64).
      if (s <= 64) {
        const std::uint64_t draw = s == 64 ? random_bits : random_bits >> (64 - s);
        return draw < rem ? q + 1 : q;
      }
      // s > 64 (inputs far below the smallest subnormal): the probability rem/2^s < 2^-11 is
      // compared with a 53-bit uniform in double, both exact; resolution 2^-53.
      const double p = std::ldexp(static_cast<double>(rem), -s);
      return static_cast<double>(random_bits >> 11) * 0x1.0p-53 < p ? q + 1 : q;
    }
    default: {
      if (s > 64) return q;  // rem < 2^53 < half
      const std::uint64_t half = std::uint64_t{1} << (s - 1);
      return (rem > half || (rem == half && (q & 1u))) ? q + 1 : q;
    }
  }
}

double round_integer(const format_info& f, double x, rounding r, std::uint64_t random_bits) {
  if (std::isnan(x)) return 0.0;
  const double a = std::fabs(x);
  double v = a;
  if (!std::isinf(a) && a < 0x1.0p62)
    v = static_cast<double>(round_to_quantum(a, 0, r, random_bits));
  v = std::signbit(x) ? -v : v;
  return std::clamp(v, f.lowest, f.max_finite);  // integers always saturate
}

double round_e8m0(const format_info& f, double x, rounding r, overflow o,
                  std::uint64_t random_bits) {
  if (std::isnan(x) || x <= 0.0) return k_nan;  // unsigned, no zero: as ml_dtypes
  if (std::isinf(x)) return overflow_magnitude(f, o, r, true);
  const int e = std::max(std::ilogb(x), -127);  // mantissa_bits = 0: quantum = binade
  const double v = std::ldexp(static_cast<double>(round_to_quantum(x, e, r, random_bits)), e);
  if (v > f.max_finite) return overflow_magnitude(f, o, r, false);
  return std::max(v, f.min_normal);  // no zero: anything below 2^-127 is 2^-127
}

double round_minifloat(const format_info& f, double x, rounding r, overflow o,
                       std::uint64_t random_bits) {
  const bool neg = std::signbit(x);
  if (std::isnan(x)) {
    // No NaN (fp6, fp4): a zero whose sign is the opposite of the NaN's, bit for bit what
    // ml_dtypes 0.6 gives (+NaN -> 0x20 in e2m3). Either zero would do; matching keeps codes
    // comparable with checkpoints written through ml_dtypes.
    if (f.nan == nan_style::m_none) return neg ? 0.0 : -0.0;
    return f.nan == nan_style::m_fnuz ? k_nan : std::copysign(k_nan, x);
  }
  const double a = std::fabs(x);
  double v = 0.0;
  if (std::isinf(a)) {
    v = overflow_magnitude(f, o, r, true);
  } else if (a != 0.0) {
    // The quantum of a's binade, never below the subnormal quantum; the count of quanta
    // is < 2^(mantissa_bits+2), so the product below is exact.
    const int e = std::max(std::ilogb(a), 1 - f.bias) - f.mantissa_bits;
    v = std::ldexp(static_cast<double>(round_to_quantum(a, e, r, random_bits)), e);
    if (v > f.max_finite) v = overflow_magnitude(f, o, r, false);
  }
  if (f.nan == nan_style::m_fnuz && v == 0.0) return 0.0;  // fnuz has no -0
  return neg ? -v : v;
}

std::uint32_t nan_code(const format_info& f, bool neg) {
  const int eb = f.exponent_bits, mb = f.mantissa_bits;
  const std::uint32_t sign = neg ? 1u << (eb + mb) : 0u;
  const std::uint32_t exp_all = (1u << eb) - 1u;
  switch (f.nan) {
    case nan_style::m_fnuz: return 0x80u;
    case nan_style::m_all_ones: return 0xFFu;
    case nan_style::m_fn: return sign | (exp_all << mb) | ((1u << mb) - 1u);
    default: return sign | (exp_all << mb) | (1u << (mb - 1));  // the quiet NaN
  }
}

[[noreturn]] void no_f64_codes() {
  throw_input_error("format f64", "f64 has no 32-bit code; use std::bit_cast<std::uint64_t>");
}

}  // namespace

// The reference codec: every format and rounding mode, quantum by quantum. The public entry
// points below send RNE on the <= 8-bit formats to fast_codec.cpp, proven equal to these.
namespace detail {

double reference_round_to(format_id id, double x, rounding r, overflow o,
                          std::uint64_t random_bits) {
  const auto& f = info(id);
  if (id == format_id::m_f64) return x;
  if (!f.is_float) return round_integer(f, x, r, random_bits);
  if (id == format_id::m_e8m0) return round_e8m0(f, x, r, o, random_bits);
  return round_minifloat(f, x, r, o, random_bits);
}

std::uint32_t reference_encode(format_id id, double x, rounding r, overflow o,
                               std::uint64_t random_bits) {
  const auto& f = info(id);
  if (id == format_id::m_f64) no_f64_codes();
  const double v = reference_round_to(id, x, r, o, random_bits);
  if (id == format_id::m_f32 || id == format_id::m_tf32)  // tf32 lives in an fp32's top 19 bits
    return std::bit_cast<std::uint32_t>(static_cast<float>(v));
  if (!f.is_float) {
    const auto iv = static_cast<std::int32_t>(v);
    return static_cast<std::uint32_t>(iv) & ((1u << f.storage_bits) - 1u);
  }
  if (std::isnan(v)) return nan_code(f, std::signbit(v));
  if (id == format_id::m_e8m0) return static_cast<std::uint32_t>(std::ilogb(v) + 127);
  const int eb = f.exponent_bits, mb = f.mantissa_bits;
  const std::uint32_t s = std::signbit(v) ? 1u << (eb + mb) : 0u;
  const double a = std::fabs(v);
  if (std::isinf(a)) return s | (((1u << eb) - 1u) << mb);
  if (a == 0.0) return s;
  const int emin = 1 - f.bias;
  const int e = std::ilogb(a);
  if (e < emin) return s | static_cast<std::uint32_t>(std::ldexp(a, mb - emin));  // subnormal
  const auto mant = static_cast<std::uint32_t>(std::ldexp(a, mb - e)) - (1u << mb);
  return s | (static_cast<std::uint32_t>(e + f.bias) << mb) | mant;
}

double reference_decode(format_id id, std::uint32_t code) {
  const auto& f = info(id);
  if (id == format_id::m_f64) no_f64_codes();
  if (f.storage_bits < 32) code &= (1u << f.storage_bits) - 1u;
  if (id == format_id::m_f32) return std::bit_cast<float>(code);
  if (id == format_id::m_tf32) return std::bit_cast<float>(code & 0xFFFFE000u);
  if (!f.is_float) {
    if (!f.is_signed) return static_cast<double>(code);
    const int shift = 32 - f.storage_bits;
    return static_cast<double>(static_cast<std::int32_t>(code << shift) >> shift);
  }
  if (id == format_id::m_e8m0) return code == 0xFFu ? k_nan : std::ldexp(1.0, int(code) - 127);
  const int eb = f.exponent_bits, mb = f.mantissa_bits;
  const std::uint32_t exp_all = (1u << eb) - 1u;
  const std::uint32_t sign = (code >> (eb + mb)) & 1u;
  const std::uint32_t ex = (code >> mb) & exp_all;
  const std::uint32_t mant = code & ((1u << mb) - 1u);
  if (f.nan == nan_style::m_fnuz && code == 0x80u) return k_nan;
  if (ex == exp_all) {
    if (f.nan == nan_style::m_ieee) return mant ? k_nan : (sign ? -k_inf : k_inf);
    if (f.nan == nan_style::m_fn && mant == (1u << mb) - 1u) return k_nan;
  }
  const double a = ex == 0
      ? std::ldexp(static_cast<double>(mant), 1 - f.bias - mb)
      : std::ldexp(static_cast<double>(mant + (1u << mb)), int(ex) - f.bias - mb);
  return sign ? -a : a;
}

}  // namespace detail

double round_to(format_id id, double x, rounding r, overflow o, std::uint64_t random_bits) {
  // Integers are left to the reference (it keeps the sign of a zero, -0.3 -> -0.0, which a
  // decoded code cannot), and so are NaN results (it keeps the sign of the NaN: -NaN for a
  // NaN input or a negative overflow to NaN; a NaN code decodes to +NaN).
  if (r == rounding::m_nearest_even && info(id).is_float && detail::has_rne_bit_codec(id)) {
    const double v = detail::table_decode(id, detail::rne_bit_encode(id, x, o));
    if (!std::isnan(v)) return v;
  }
  return detail::reference_round_to(id, x, r, o, random_bits);
}

std::uint32_t encode(format_id id, double x, rounding r, overflow o, std::uint64_t random_bits) {
  if (std::uint32_t code = 0;
      r == rounding::m_nearest_even && detail::try_rne_bit_encode(id, x, o, code))
    return code;
  return detail::reference_encode(id, x, r, o, random_bits);
}

double decode(format_id id, std::uint32_t code) {
  if (double v = 0.0; detail::try_table_decode(id, code, v)) return v;
  return detail::reference_decode(id, code);
}

bool is_nan_code(format_id id, std::uint32_t code) { return std::isnan(decode(id, code)); }

special_codes specials(format_id id) {
  const auto& f = info(id);
  if (id == format_id::m_f64) no_f64_codes();
  special_codes c;
  c.max_finite = encode(id, f.max_finite);
  if (f.has_inf) {
    c.pos_inf = encode(id, k_inf, rounding::m_nearest_even, overflow::m_inf);
    c.neg_inf = encode(id, -k_inf, rounding::m_nearest_even, overflow::m_inf);
  }
  if (f.nan != nan_style::m_none) {
    c.nan = encode(id, k_nan);
    c.neg_nan = encode(id, -k_nan);
  }
  if (f.is_float && f.is_signed && f.nan != nan_style::m_fnuz) c.neg_zero = encode(id, -0.0);
  return c;
}

std::uint64_t stochastic_bits(std::uint64_t seed, std::uint64_t index) {
  // splitmix64 (Steele, Lea, Flood 2014) of a counter derived from (seed, index).
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {
template <class T>
void encode_span(format_id id, std::span<const T> in, std::span<std::uint32_t> out,
                 const codec_options& opt) {
  if (in.size() != out.size())
    throw_input_error("encode_many", "input and output sizes differ");
  const bool sr = opt.round == rounding::m_stochastic;
  for (std::size_t i = 0; i < in.size(); ++i)
    out[i] = encode(id, static_cast<double>(in[i]), opt.round, opt.over,
                    sr ? stochastic_bits(opt.seed, i) : 0);
}
}  // namespace

void encode_many(format_id id, std::span<const double> in, std::span<std::uint32_t> out,
                 const codec_options& opt) {
  encode_span(id, in, out, opt);
}

void encode_many(format_id id, std::span<const float> in, std::span<std::uint32_t> out,
                 const codec_options& opt) {
  encode_span(id, in, out, opt);
}

void decode_many(format_id id, std::span<const std::uint32_t> in, std::span<double> out) {
  if (in.size() != out.size())
    throw_input_error("decode_many", "input and output sizes differ");
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = decode(id, in[i]);
}

}  // namespace numprobe::formats
