#pragma once
// The block quantizer's element codec on four lanes: x -> t = x / s -> RNE(t) on the element
// grid -> dq, with IEEE operations only (no tables, no libm), equal to quantize()'s
// element_coder::code (scheme_quantize.cpp) element by element.
//
// Per element:
//   t  = (x / s) / unit            (s == 0: t = 0; s a power of two: x * (1/s) * (1/unit),
//                                   the same correctly rounded value, since 1/s is exact)
//   y  = RNE(t) on the element grid, saturated to the format's range
//   dq = y * (unit * s)            (exact in double: y has <= 4 significant bits (int8: 8) and
//                                   s <= 4 + 24, so neither product rounds; quantize()'s
//                                   decode(code) * unit * s is the same exact value)
//   clipped: t > max or t < lowest; flushed: x != 0 and dq == 0 (finite x only).
// RNE(t) for minifloats: a normal |t| (>= the format's min normal) has its double pattern
// rounded to nearest-even at bit 52 - mb (a carry moves into the exponent: the next binade),
// exactly fast_codec.cpp's minifloat(); below min normal the quantum q is fixed and
// (|t| + q 2^52) - q 2^52 rounds |t| to a multiple of q, ties to even (|t| + q 2^52 lies in
// [2^52 q, 2^53 q), whose ulp is q; the subtraction is exact). Integers use the same with
// q = 1, then clamp to [lowest, max] as fast_codec.cpp's integer() does. The additions assume
// the default rounding mode (round to nearest), as the division x / s itself does.
//
// Private to numprobe (the block quantizer's kernels and their observers): not installed.
#include <bit>
#include <cstdint>

#include "numprobe/formats/scheme.hpp"
#include "src/formats/convention_math.hpp"
#include "src/formats/simd_v4.hpp"

namespace numprobe::formats::detail {

// The element rounding of one element format.
struct element_rounding {
  bool integer = false;
  double max = 0.0, lowest = 0.0, min_normal = 0.0, sub_magic = 0.0;
  std::uint64_t half_m1 = 0, drop = 0, low_mask = 0;
  // How t is formed (conventions.hpp): NVFP4's reciprocal divisions need the tensor scale to
  // rebuild the block scale s_b = s / s_t (exact) and the fp32 multiplier of each block.
  scale_division division = scale_division::m_exact;
  double tensor_scale = 1.0;

  // RNE(t) on the element grid, saturated, with t's sign (a zero may keep a - sign here).
  v4d round(v4d t) const {
    const v4u sign = reinterpret_cast<v4u>(t) & splat_u(k_sign);
    const v4d a = vabs(t);
    const v4d magic = splat(sub_magic);
    const v4d fixed = (a + magic) - magic;  // multiples of the quantum, ties to even
    if (integer) {
      const v4d y = a < magic ? fixed : a;  // >= 2^52: an integer already
      v4d ys = reinterpret_cast<v4d>(reinterpret_cast<v4u>(y) | sign);
      ys = ys > splat(max) ? splat(max) : ys;
      return ys < splat(lowest) ? splat(lowest) : ys;
    }
    const v4u ua = reinterpret_cast<v4u>(a);
    const v4u rn = (ua + splat_u(half_m1) + ((ua >> drop) & splat_u(1))) & ~splat_u(low_mask);
    v4d y = a < splat(min_normal) ? fixed : reinterpret_cast<v4d>(rn);
    y = y > splat(max) ? splat(max) : y;  // saturate (an infinite t too)
    return reinterpret_cast<v4d>(reinterpret_cast<v4u>(y) | sign);
  }
};

// The rounding constants of format f (has_rne_bit_codec, at most 8 bits, with subnormals).
[[nodiscard]] element_rounding rounding_of(format_id f);

// One block's multipliers: t = quotient(x), dq = round(t) * eff.
struct block_coder {
  bool pow2 = false;
  double div = 1.0, inv = 1.0, inv_unit = 1.0, eff = 1.0;
  float mul32 = 0.0f;  // a reciprocal division's fp32 multiplier (0: divide)

  block_coder(const block_stats& b, double unit, const element_rounding& er)
      : block_coder(b.scale, unit, er) {}
  block_coder(double s, double unit, const element_rounding& er) : block_coder(s, unit) {
    // quantize()'s element_coder: t = f32(f32(x) * r) (unit is 1 for NVFP4).
    if (er.division != scale_division::m_exact)
      mul32 = element_multiplier(er.division, s / er.tensor_scale, er.tensor_scale);
  }
  block_coder(double s, double unit) {
    const auto u = std::bit_cast<std::uint64_t>(s);
    const std::uint64_t e = (u >> 52) & 0x7FF;
    // A normal power of two with a normal reciprocal: x * (1/s) is the quotient x / s.
    pow2 = (u & ((std::uint64_t{1} << 52) - 1)) == 0 && e >= 1 && e <= 2045 && s > 0;
    inv = pow2 ? 1.0 / s : 1.0;
    inv_unit = 1.0 / unit;  // unit is 1 or 2^-6
    div = s == 0.0 ? k_inf : s;  // finite x / inf = 0: quantize()'s t = 0 for a zero scale
    eff = unit * s;
  }
  v4d quotient(v4d x) const {
    if (mul32 != 0.0f) {
      const v4f xf = __builtin_convertvector(x, v4f);  // RNE, as static_cast<float>
      return __builtin_convertvector(xf * v4f{mul32, mul32, mul32, mul32}, v4d);
    }
    return pow2 ? (x * splat(inv)) * splat(inv_unit) : x / splat(div);
  }
};

// Four elements coded: the quotient t, the dequantized value dq, and the lanes whose input is
// finite (and valid: inside the segment).
struct lane_code {
  v4d t, dq;
  v4i finite;
};

inline lane_code code_lanes(const element_rounding& er, const block_coder& bc, v4d x, v4i valid) {
  const v4i fin = (vabs(x) < splat(k_inf)) & valid;
  const v4d t = bc.quotient(x);
  return {t, er.round(t) * splat(bc.eff), fin};
}

// Adds the lanes' flushes (low 32 bits) and clips (high 32 bits) to `counts`.
inline void count_flushes_and_clips(const element_rounding& er, v4d x, const lane_code& c, v4i& counts) {
  const v4d zero = splat(0.0);
  const v4i flush = c.finite & (x != zero) & (c.dq == zero);
  const v4i clip = c.finite & ((c.t > splat(er.max)) | (c.t < splat(er.lowest)));
  counts += (flush & splat_i(1)) + (clip & splat_i(std::int64_t{1} << 32));
}

}  // namespace numprobe::formats::detail
