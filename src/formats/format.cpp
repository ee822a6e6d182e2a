// Format table and the generic exact rounding/encoding of minifloats and integers.
#include "numprobe/formats/format.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "numprobe/core/error.hpp"

namespace numprobe::formats {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

// Largest finite value of a minifloat from its layout and NaN convention.
constexpr double max_finite_of(int eb, int mb, int bias, nan_style n, bool has_inf) {
  const int exp_all_ones = (1 << eb) - 1;
  int top_exp = exp_all_ones;
  double top_mant = 2.0 - std::ldexp(1.0, -mb);  // 1.11..1
  if (has_inf || n == nan_style::m_ieee) {
    top_exp = exp_all_ones - 1;  // all-ones exponent is inf/NaN
  } else if (n == nan_style::m_fn) {
    top_mant = 2.0 - std::ldexp(2.0, -mb);  // 1.11..10: all-ones mantissa is NaN
  } else if (n == nan_style::m_all_ones) {
    top_exp = exp_all_ones - 1;
    top_mant = 1.0;
  }
  return std::ldexp(top_mant, top_exp - bias);
}

constexpr format_info make_float(format_id id, std::string_view nm, int bits, int storage, int eb,
                                 int mb, int bias, bool has_inf, nan_style n, overflow dflt) {
  const double mx = max_finite_of(eb, mb, bias, n, has_inf);
  const double mn = std::ldexp(1.0, 1 - bias);
  return format_info{id, nm, bits, storage, eb, mb, bias, true, true, has_inf, n, mx, mn,
                     std::ldexp(mn, -mb), -mx, dflt};
}

const std::array<format_info, 16> k_formats = [] {
  using o = overflow;
  using n = nan_style;
  std::array<format_info, 16> t{};
  t[0] = make_float(format_id::m_f64, "f64", 64, 64, 11, 52, 1023, true, n::m_ieee, o::m_inf);
  t[1] = make_float(format_id::m_f32, "f32", 32, 32, 8, 23, 127, true, n::m_ieee, o::m_inf);
  t[2] = make_float(format_id::m_tf32, "tf32", 19, 32, 8, 10, 127, true, n::m_ieee, o::m_inf);
  t[3] = make_float(format_id::m_bf16, "bf16", 16, 16, 8, 7, 127, true, n::m_ieee, o::m_inf);
  t[4] = make_float(format_id::m_f16, "f16", 16, 16, 5, 10, 15, true, n::m_ieee, o::m_inf);
  t[5] = make_float(format_id::m_e4m3fn, "e4m3fn", 8, 8, 4, 3, 7, false, n::m_fn, o::m_nan);
  t[6] = make_float(format_id::m_e4m3fnuz, "e4m3fnuz", 8, 8, 4, 3, 8, false, n::m_fnuz, o::m_nan);
  t[7] = make_float(format_id::m_e5m2, "e5m2", 8, 8, 5, 2, 15, true, n::m_ieee, o::m_inf);
  t[8] = make_float(format_id::m_e5m2fnuz, "e5m2fnuz", 8, 8, 5, 2, 16, false, n::m_fnuz, o::m_nan);
  t[9] = make_float(format_id::m_e2m3, "e2m3", 6, 8, 2, 3, 1, false, n::m_none, o::m_saturate);
  t[10] = make_float(format_id::m_e3m2, "e3m2", 6, 8, 3, 2, 3, false, n::m_none, o::m_saturate);
  t[11] = make_float(format_id::m_e2m1, "e2m1", 4, 4, 2, 1, 1, false, n::m_none, o::m_saturate);
  // e8m0: unsigned powers of two 2^-127 .. 2^127, 0xFF is NaN, no zero, no subnormals.
  t[12] = format_info{format_id::m_e8m0, "e8m0", 8, 8, 8, 0, 127, true, false, false,
                      n::m_all_ones, std::ldexp(1.0, 127), std::ldexp(1.0, -127), 0.0, 0.0,
                      o::m_saturate};
  t[13] = format_info{format_id::m_i8, "int8", 8, 8, 0, 7, 0, false, true, false, n::m_none,
                      127.0, 1.0, 1.0, -128.0, o::m_saturate};
  t[14] = format_info{format_id::m_i4, "int4", 4, 4, 0, 3, 0, false, true, false, n::m_none,
                      7.0, 1.0, 1.0, -8.0, o::m_saturate};
  t[15] = format_info{format_id::m_u4, "uint4", 4, 4, 0, 4, 0, false, false, false, n::m_none,
                      15.0, 1.0, 1.0, 0.0, o::m_saturate};
  return t;
}();

struct alias {
  std::string_view text;
  format_id id;
};
constexpr std::array<alias, 40> k_aliases{{
    {"f64", format_id::m_f64},        {"fp64", format_id::m_f64},
    {"float64", format_id::m_f64},    {"double", format_id::m_f64},
    {"f32", format_id::m_f32},        {"fp32", format_id::m_f32},
    {"float32", format_id::m_f32},    {"float", format_id::m_f32},
    {"tf32", format_id::m_tf32},      {"bf16", format_id::m_bf16},
    {"bfloat16", format_id::m_bf16},  {"f16", format_id::m_f16},
    {"fp16", format_id::m_f16},       {"float16", format_id::m_f16},
    {"half", format_id::m_f16},       {"e4m3fn", format_id::m_e4m3fn},
    {"e4m3", format_id::m_e4m3fn},    {"fp8_e4m3fn", format_id::m_e4m3fn},
    {"float8_e4m3fn", format_id::m_e4m3fn}, {"e4m3fnuz", format_id::m_e4m3fnuz},
    {"float8_e4m3fnuz", format_id::m_e4m3fnuz}, {"e5m2", format_id::m_e5m2},
    {"fp8_e5m2", format_id::m_e5m2},  {"float8_e5m2", format_id::m_e5m2},
    {"e5m2fnuz", format_id::m_e5m2fnuz}, {"float8_e5m2fnuz", format_id::m_e5m2fnuz},
    {"e2m3", format_id::m_e2m3},      {"fp6_e2m3", format_id::m_e2m3},
    {"e3m2", format_id::m_e3m2},      {"fp6_e3m2", format_id::m_e3m2},
    {"e2m1", format_id::m_e2m1},      {"fp4", format_id::m_e2m1},
    {"fp4_e2m1", format_id::m_e2m1},  {"float4_e2m1fn", format_id::m_e2m1},
    {"e8m0", format_id::m_e8m0},      {"float8_e8m0fnu", format_id::m_e8m0},
    {"int8", format_id::m_i8},        {"int4", format_id::m_i4},
    {"uint4", format_id::m_u4},       {"i8", format_id::m_i8},
}};

overflow resolve(const format_info& f, overflow o) {
  if (o == overflow::m_format_default) return f.default_overflow;
  if (o == overflow::m_inf && !f.has_inf) return f.nan == nan_style::m_none ? overflow::m_saturate
                                                                              : overflow::m_nan;
  if (o == overflow::m_nan && f.nan == nan_style::m_none) return overflow::m_saturate;
  return o;
}

double apply_overflow(const format_info& f, overflow o, bool neg) {
  switch (o) {
    case overflow::m_saturate: return neg ? f.lowest : f.max_finite;
    case overflow::m_inf: return neg ? -k_inf : k_inf;
    default: return k_nan;
  }
}

// Round an integer-valued quotient t >= 0 per the rounding mode.
double round_quotient(double t, rounding r, std::uint64_t random_bits) {
  switch (r) {
    case rounding::m_toward_zero: return std::trunc(t);
    case rounding::m_stochastic: {
      const double fl = std::floor(t);
      // 53 random bits as a uniform in [0, 1): exact in double.
      const double u = static_cast<double>(random_bits >> 11) * 0x1.0p-53;
      return (u < t - fl) ? fl + 1.0 : fl;
    }
    default: return std::nearbyint(t);  // the FE_TONEAREST mode: ties to even
  }
}

double round_integer(const format_info& f, double x, rounding r, overflow o,
                     std::uint64_t random_bits) {
  if (std::isnan(x)) return 0.0;  // integers have no NaN; callers count NaN inputs first
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  double v = std::isinf(a) ? a : round_quotient(a, r, random_bits);
  v = neg ? -v : v;
  (void)o;  // integers always saturate
  return std::clamp(v, f.lowest, f.max_finite);
}

double round_e8m0(const format_info& f, double x, rounding r, overflow o,
                  std::uint64_t random_bits) {
  if (std::isnan(x) || x < 0) return k_nan;  // unsigned: no sign, no negative values
  if (x == 0) return f.min_normal;           // no zero: the smallest scale
  if (std::isinf(x)) return apply_overflow(f, resolve(f, o), false);
  const int e = std::max(std::ilogb(x), -127);
  const double t = std::ldexp(x, -e);  // in [1, 2) (or below 1 for values under 2^-127)
  const double v = std::ldexp(round_quotient(t, r, random_bits), e);
  if (v > f.max_finite) return apply_overflow(f, resolve(f, o), false);
  return std::max(v, f.min_normal);
}

}  // namespace

std::span<const format_info> all_formats() { return k_formats; }

const format_info& info(format_id id) { return k_formats[static_cast<std::size_t>(id)]; }

std::string_view name(format_id id) { return info(id).name; }

format_id parse_format(std::string_view text, const std::string& place) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& a : k_aliases)
    if (a.text == lower) return a.id;
  std::string known;
  for (const auto& f : k_formats) known += (known.empty() ? "" : ", ") + std::string(f.name);
  throw_input_error(place, "unknown number format '" + std::string(text) + "' (known: " + known +
                               ")");
}

double unit_roundoff(format_id id) {
  const auto& f = info(id);
  if (!f.is_float) return 0.5;
  return std::ldexp(1.0, -(f.mantissa_bits + 1));
}

double round_to(format_id id, double x, rounding r, overflow o, std::uint64_t random_bits) {
  const auto& f = info(id);
  if (id == format_id::m_f64) return x;
  if (!f.is_float) return round_integer(f, x, r, o, random_bits);
  if (id == format_id::m_e8m0) return round_e8m0(f, x, r, o, random_bits);
  if (std::isnan(x)) return f.nan == nan_style::m_none ? k_nan : k_nan;
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  double v;
  if (std::isinf(a)) {
    v = f.has_inf ? k_inf : apply_overflow(f, resolve(f, o), false);
  } else if (a == 0.0) {
    v = 0.0;
  } else {
    // The quantum of the binade containing a, never below the subnormal quantum.
    const int emin = 1 - f.bias;
    const int e = std::max(std::ilogb(a), emin);
    const double q = std::ldexp(1.0, e - f.mantissa_bits);
    // a / q is exact (power-of-two scaling) and < 2^(mantissa_bits+1), so rounding it to an
    // integer rounds a to the format's grid in one step, with an unbounded exponent.
    v = round_quotient(a / q, r, random_bits) * q;
    if (v > f.max_finite) v = apply_overflow(f, resolve(f, o), false);
  }
  if (f.nan == nan_style::m_fnuz && v == 0.0) return 0.0;  // fnuz has no -0
  return neg ? -v : v;
}

float round_float_to(format_id id, float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  switch (id) {
    case format_id::m_f32:
    case format_id::m_f64: return x;
    case format_id::m_bf16:
    case format_id::m_tf32: {
      if (std::isnan(x)) return x;
      const int drop = id == format_id::m_bf16 ? 16 : 13;
      const std::uint32_t half = (1u << (drop - 1)) - 1u;
      const std::uint32_t lsb = (u >> drop) & 1u;
      u = (u + half + lsb) & ~((1u << drop) - 1u);  // RNE; carries into exponent, to inf
      return std::bit_cast<float>(u);
    }
    default: return static_cast<float>(round_to(id, static_cast<double>(x)));
  }
}

std::uint32_t encode(format_id id, double x, rounding r, overflow o, std::uint64_t random_bits) {
  const auto& f = info(id);
  const double v = round_to(id, x, r, o, random_bits);
  if (id == format_id::m_f64) return 0;  // 64-bit codes do not fit; use std::bit_cast
  if (id == format_id::m_f32 || id == format_id::m_tf32)  // tf32 lives in an fp32's top 19 bits
    return std::bit_cast<std::uint32_t>(static_cast<float>(v));
  if (!f.is_float) {
    const auto iv = static_cast<std::int32_t>(v);
    return static_cast<std::uint32_t>(iv) & ((1u << f.storage_bits) - 1u);
  }
  if (id == format_id::m_e8m0) {
    if (std::isnan(v)) return 0xFFu;
    return static_cast<std::uint32_t>(std::ilogb(v) + 127);
  }
  const int eb = f.exponent_bits, mb = f.mantissa_bits;
  const std::uint32_t sign_bit = 1u << (eb + mb);
  const std::uint32_t exp_all = (1u << eb) - 1u;
  if (std::isnan(v)) {
    switch (f.nan) {
      case nan_style::m_fnuz: return 0x80u;
      case nan_style::m_fn: return (exp_all << mb) | ((1u << mb) - 1u);
      default: return (exp_all << mb) | (1u << (mb - 1));  // quiet NaN
    }
  }
  const std::uint32_t s = std::signbit(v) ? sign_bit : 0u;
  const double a = std::fabs(v);
  if (std::isinf(a)) return s | (exp_all << mb);
  if (a == 0.0) return s;
  const int emin = 1 - f.bias;
  const int e = std::ilogb(a);
  std::uint32_t code;
  if (e < emin) {
    code = static_cast<std::uint32_t>(std::ldexp(a, f.bias - 1 + mb));  // subnormal
  } else {
    const auto mant = static_cast<std::uint32_t>(std::ldexp(a, mb - e)) - (1u << mb);
    code = (static_cast<std::uint32_t>(e + f.bias) << mb) | mant;
  }
  return s | code;
}

double decode(format_id id, std::uint32_t code) {
  const auto& f = info(id);
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
  double a = ex == 0 ? std::ldexp(static_cast<double>(mant), 1 - f.bias - mb)
                     : std::ldexp(static_cast<double>(mant + (1u << mb)), int(ex) - f.bias - mb);
  return sign ? -a : a;
}

}  // namespace numprobe::formats
