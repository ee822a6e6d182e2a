// The format table (the facts of NUMERICS.md, derived from each layout) and name parsing.
// The codecs live in codec.cpp.
#include "numprobe/formats/format.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "numprobe/base/error.hpp"

namespace numprobe::formats {
namespace {

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

// Built on first use, not at static initialisation: a global elsewhere (a test's
// `const double u = unit_roundoff(bf16)`) may be initialised first, and would read a table of
// zeros (clang's link order did exactly that: u = 0.5 for bf16).
const std::array<format_info, 16>& format_table() {
  static const std::array<format_info, 16> table = [] {
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
    // Its default overflow is NaN because ml_dtypes' float8_e8m0fnu turns 2^128 and inf into
    // 0xFF; MX scale rules that need clamping pass m_saturate explicitly.
    t[12] = format_info{format_id::m_e8m0, "e8m0", 8, 8, 8, 0, 127, true, false, false,
                        n::m_all_ones, std::ldexp(1.0, 127), std::ldexp(1.0, -127), 0.0, 0.0,
                        o::m_nan};
    t[13] = format_info{format_id::m_i8, "int8", 8, 8, 0, 7, 0, false, true, false, n::m_none,
                        127.0, 1.0, 1.0, -128.0, o::m_saturate};
    t[14] = format_info{format_id::m_i4, "int4", 4, 4, 0, 3, 0, false, true, false, n::m_none,
                        7.0, 1.0, 1.0, -8.0, o::m_saturate};
    t[15] = format_info{format_id::m_u4, "uint4", 4, 4, 0, 4, 0, false, false, false, n::m_none,
                        15.0, 1.0, 1.0, 0.0, o::m_saturate};
    return t;
  }();
  return table;
}

struct alias {
  std::string_view text;
  format_id id;
};
constexpr alias k_aliases[] = {
    {"f64", format_id::m_f64},          {"fp64", format_id::m_f64},
    {"float64", format_id::m_f64},      {"double", format_id::m_f64},
    {"f32", format_id::m_f32},          {"fp32", format_id::m_f32},
    {"float32", format_id::m_f32},      {"float", format_id::m_f32},
    {"tf32", format_id::m_tf32},        {"bf16", format_id::m_bf16},
    {"bfloat16", format_id::m_bf16},    {"f16", format_id::m_f16},
    {"fp16", format_id::m_f16},         {"float16", format_id::m_f16},
    {"half", format_id::m_f16},         {"e4m3fn", format_id::m_e4m3fn},
    {"e4m3", format_id::m_e4m3fn},      {"fp8_e4m3fn", format_id::m_e4m3fn},
    {"fp8_e4m3", format_id::m_e4m3fn},  {"float8_e4m3fn", format_id::m_e4m3fn},
    {"e4m3fnuz", format_id::m_e4m3fnuz}, {"fp8_e4m3fnuz", format_id::m_e4m3fnuz},
    {"float8_e4m3fnuz", format_id::m_e4m3fnuz}, {"e5m2", format_id::m_e5m2},
    {"fp8_e5m2", format_id::m_e5m2},    {"float8_e5m2", format_id::m_e5m2},
    {"e5m2fnuz", format_id::m_e5m2fnuz}, {"fp8_e5m2fnuz", format_id::m_e5m2fnuz},
    {"float8_e5m2fnuz", format_id::m_e5m2fnuz}, {"e2m3", format_id::m_e2m3},
    {"e2m3fn", format_id::m_e2m3},      {"fp6_e2m3", format_id::m_e2m3},
    {"float6_e2m3fn", format_id::m_e2m3}, {"e3m2", format_id::m_e3m2},
    {"e3m2fn", format_id::m_e3m2},      {"fp6_e3m2", format_id::m_e3m2},
    {"float6_e3m2fn", format_id::m_e3m2}, {"e2m1", format_id::m_e2m1},
    {"e2m1fn", format_id::m_e2m1},      {"fp4", format_id::m_e2m1},
    {"fp4_e2m1", format_id::m_e2m1},    {"float4_e2m1fn", format_id::m_e2m1},
    {"e8m0", format_id::m_e8m0},        {"e8m0fnu", format_id::m_e8m0},
    {"ue8m0", format_id::m_e8m0},       {"float8_e8m0fnu", format_id::m_e8m0},
    {"int8", format_id::m_i8},          {"i8", format_id::m_i8},
    {"int4", format_id::m_i4},          {"i4", format_id::m_i4},
    {"uint4", format_id::m_u4},         {"u4", format_id::m_u4},
};

}  // namespace

std::span<const format_info> all_formats() { return format_table(); }

const format_info& info(format_id id) { return format_table()[static_cast<std::size_t>(id)]; }

std::string_view name(format_id id) { return info(id).name; }

format_id parse_format(std::string_view text, const std::string& place) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& a : k_aliases)
    if (a.text == lower) return a.id;
  std::string known;
  for (const auto& f : format_table()) known += (known.empty() ? "" : ", ") + std::string(f.name);
  throw_input_error(place, "unknown number format '" + std::string(text) + "' (known: " + known +
                               ")");
}

double unit_roundoff(format_id id) {
  const auto& f = info(id);
  if (!f.is_float) return 0.5;
  return std::ldexp(1.0, -(f.mantissa_bits + 1));
}

}  // namespace numprobe::formats
