// The arithmetic of each quantization convention (convention_math.hpp).
#include "src/formats/convention_math.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace numprobe::formats::detail {
namespace {

// A model of PTX rcp.approx.ftz.f32: a subnormal input or result flushes to a zero of its
// sign; otherwise the correctly rounded fp32 1/a. The hardware instruction is approximate
// (its maximum error is not specified as 0 ulp), so a real kernel can differ from this model
// in the last ulp of r; docs/quant-conventions.md says so.
float rcp_ftz(float a) {
  if (std::fabs(a) < FLT_MIN) a = std::copysign(0.0f, a);
  const float r = 1.0f / a;
  return std::fabs(r) < FLT_MIN ? std::copysign(0.0f, r) : r;
}

}  // namespace

double store_scale(format_id f, double s) {
  if (f == format_id::m_e8m0) {
    int e = std::ilogb(s);
    if (std::ldexp(1.0, e) < s) ++e;
    return std::ldexp(1.0, std::clamp(e, -127, 127));
  }
  return round_to(f, s, rounding::m_nearest_even, overflow::m_saturate);
}

int mx_mantissa_bits(const scheme_config& c) {
  return c.element == format_id::m_i8 ? 6 : info(c.element).mantissa_bits;
}

int mx_exponent(mx_rule r, double amax, double max_value, int emax, int mbits) {
  const int fl = std::ilogb(amax);
  const bool pow2 = std::ldexp(1.0, fl) == amax;
  switch (r) {
    case mx_rule::m_floor: return fl - emax;
    case mx_rule::m_ceil: return fl + (pow2 ? 0 : 1) - emax;
    case mx_rule::m_rceil: {
      // The smallest X with max_elem * 2^X >= amax, found exactly (no rounded division).
      int x = fl - std::ilogb(max_value);
      while (std::ldexp(max_value, x) < amax) ++x;
      while (std::ldexp(max_value, x - 1) >= amax) --x;
      return x;
    }
    case mx_rule::m_even: {
      // RNE of amax's significand to mbits bits carries into the next binade exactly when
      // amax >= (2 - 2^-(mbits+1)) 2^fl (the tie goes up: 2 is the even neighbour), which is
      // what torchao's add-half-then-truncate on the fp32 pattern decides.
      const double carry = std::ldexp(2.0 - std::ldexp(1.0, -(mbits + 1)), fl);
      return fl + (amax >= carry ? 1 : 0) - emax;
    }
    case mx_rule::m_nearest: {
      // round(log2(amax)) = fl + 1 iff amax >= sqrt(2) 2^fl; compared exactly as
      // (amax / 2^fl)^2 >= 2, the square of a double in [1, 2) rounded once: a rounded square
      // s of m in [1, 2) is >= 2 iff m^2 >= 2 (2 is representable and rounding is monotone).
      const double m = std::ldexp(amax, -fl);
      return fl + (m * m >= 2.0 ? 1 : 0) - emax;
    }
  }
  return fl - emax;
}

double nvfp4_block_scale(const scheme_config& c, double amax, double max_value, double s_t) {
  const auto& sf = info(c.scale_format);
  double ideal = 0.0;
  if (c.conv.arith == scale_arith::m_fp32) {
    // torchao: block_scale = max_abs / 6 in fp32, then / per_tensor_scale in fp32.
    const float a = static_cast<float>(amax);
    const float q = a / static_cast<float>(max_value);
    ideal = static_cast<double>(q / static_cast<float>(s_t));
  } else {
    ideal = amax / (max_value * s_t);  // exact: 6 s_t has at most 26 significant bits
  }
  // torchao clamps to [E4M3_EPS, 448] = [2^-6, 448] before the e4m3 cast (the all-zero block
  // too: its scale is 2^-6, not 0).
  if (c.conv.floor == scale_floor::m_min_normal) ideal = std::max(ideal, sf.min_normal);
  return store_scale(c.scale_format, ideal);
}

float element_multiplier(scale_division d, double sb, double s_t) {
  if (d == scale_division::m_exact || sb == 0.0) return 0.0f;
  const float g = 1.0f / static_cast<float>(s_t);  // the encode (global) scale 1 / s_t
  const float b = static_cast<float>(sb);           // an e4m3 value: exact in fp32
  float r = 0.0f;
  if (d == scale_division::m_reciprocal) r = g / b;  // torchao: (1 / s_t) / s_b
  else r = rcp_ftz(b * rcp_ftz(g));                  // TRT-LLM: rcp(SFValue * rcp(SFScaleVal))
  return std::isfinite(r) && r > 0.0f ? r : 0.0f;
}

}  // namespace numprobe::formats::detail
