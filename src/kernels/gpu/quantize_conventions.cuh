#pragma once
// The quantization conventions (numprobe/formats/conventions.hpp) in the quantize kernels, as
// plain C++ usable on the host too, like quantize_codec.cuh: the NVFP4 block scale under
// scale_floor / scale_arith, the element multiplier of a reciprocal scale_division, and the e2m1
// decision thresholds of a reciprocal. The reference is src/formats/convention_math.cpp; each
// function below performs the same IEEE operations in the same order, so the codes agree bit for
// bit (tests/kernels/test_gpu_quantize_conventions.cpp on the host, tests/gpu on the device).
//
// fp32 operations are written as single float +, *, / on values stored to float; device float
// division is IEEE round-to-nearest (nvcc's default -prec-div=true, HIP's correctly rounded
// divide): the build never passes --use_fast_math to these kernels.
#include <cstdint>

#include "src/kernels/gpu/quantize_codec.cuh"

namespace numprobe::gpu::codec {

// The NVFP4 axes as the kernels take them (formats::scale_division order: 0 exact,
// 1 reciprocal, 2 reciprocal-approx).
struct nvfp4_conventions {
  int division = 0;
  bool min_normal_floor = false;  // scale_floor min-normal: the ideal scale clamped up to 2^-6
  bool fp32_arith = false;        // scale_arith fp32: f32(f32(amax) / 6) / s_t
  [[nodiscard]] NUMPROBE_HD bool is_default() const {
    return division == 0 && !min_normal_floor && !fp32_arith;
  }
};

// The reference's model of rcp.approx.ftz.f32: a subnormal operand or result flushes to a zero
// of its sign, otherwise the correctly rounded 1 / a.
NUMPROBE_HD float rcp_ftz_model(float a) {
  constexpr float min_normal = 0x1.0p-126f;
  if (std::fabs(a) < min_normal) a = std::copysign(0.0f, a);
  const float r = 1.0f / a;
  return std::fabs(r) < min_normal ? std::copysign(0.0f, r) : r;
}

// NVFP4's stored e4m3 block scale of a block with finite amax >= 0 under the floor and arith
// axes (detail::nvfp4_block_scale).
NUMPROBE_HD scale_value nvfp4_block_scale(const nvfp4_conventions& c, float amax, float st) {
  double ideal;
  if (c.fp32_arith) {
    const float q = amax / 6.0f;
    const float s = q / st;
    ideal = static_cast<double>(s);
  } else {
    ideal = static_cast<double>(amax) / (6.0 * static_cast<double>(st));  // 6 s_t exact
  }
  if (c.min_normal_floor && !(ideal >= 0x1.0p-6)) ideal = 0x1.0p-6;
  if (!(ideal > 0.0)) return {0.0f, 0u};
  return store_scale(scale_fmt::m_e4m3, ideal);
}

// The fp32 multiplier r of t = f32(v * r) for a reciprocal division (detail::element_multiplier):
// 0 for exact division, for sb = 0, and where r is not a positive finite float (those blocks are
// coded by exact division, as in the reference).
NUMPROBE_HD float element_multiplier(int division, float sb, float st) {
  if (division == 0 || sb == 0.0f) return 0.0f;
  const float g = 1.0f / st;
  const float r = division == 1 ? g / sb : rcp_ftz_model(sb * rcp_ftz_model(g));
  return (r > 0.0f && r <= 3.4028235e38f) ? r : 0.0f;
}

// e2m1 decision thresholds of t = f32(|v| r), so that encode_e2m1_thresholds(v, .) is the RNE
// e2m1 code of t. t >= m_k counts for the odd k (a tie goes up to the even code k + 1) and
// t > m_k for the even k; f32(x r) is non-decreasing in x, so each condition holds exactly for
// x >= T_k, the smallest such float. T_k starts from RN(m_k / r), whose product lies within an
// ulp of m_k, and moves one float at a time (at most a few steps; bounded for safety).
NUMPROBE_HD e2m1_thresholds make_e2m1_thresholds_reciprocal(float r) {
  constexpr float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  constexpr float inf = __builtin_huge_valf();
  e2m1_thresholds t{};
NUMPROBE_HD_UNROLL
  for (int k = 0; k < 7; ++k) {
    const float m = mid[k];
    const bool up_at_tie = (k & 1) != 0;
    const auto codes_above = [&](float x) {
      const float p = x * r;
      return up_at_tie ? p >= m : p > m;
    };
    float x = m / r;
    for (int i = 0; i < 16 && x > 0.0f && codes_above(u2f(f2u(x) - 1u)); ++i) x = u2f(f2u(x) - 1u);
    for (int i = 0; i < 16 && x < inf && !codes_above(x); ++i) x = u2f(f2u(x) + 1u);
    t.thr[k] = x;
  }
  return t;
}

// The e2m1 thresholds of an NVFP4 block (sb > 0) under the division axis: the exact decision
// points m_k sb st, or the reciprocal's.
NUMPROBE_HD e2m1_thresholds nvfp4_thresholds(int division, float sb, float st) {
  const float r = element_multiplier(division, sb, st);
  if (r != 0.0f) return make_e2m1_thresholds_reciprocal(r);
  return e2m1_thresholds_f32_ok(st) ? make_e2m1_thresholds_f32(sb, st) : make_e2m1_thresholds(sb, st);
}

// The `even` (rule 3: the amax significand rounded to mbits bits first) and `nearest` (4) MX
// exponents. Out of line on the device: the default kernels' register allocation stays that of
// the floor / ceil / rceil path, which they take (bench: mxfp4 bandwidth unchanged).
#if defined(__CUDACC__) || defined(__HIPCC__)
inline __host__ __device__ __noinline__
#else
inline
#endif
int mx_exponent_rounded(int rule, double a, int fl, int emax, int mbits) {
  if (rule == 3) {
    const double carry = std::ldexp(2.0 - std::ldexp(1.0, -(mbits + 1)), fl);
    return fl + (a >= carry ? 1 : 0) - emax;
  }
  const double m = std::ldexp(a, -fl);
  return fl + (m * m >= 2.0 ? 1 : 0) - emax;
}

// MX shared exponent X before the clamp (detail::mx_exponent), for amax > 0 finite: rule 0 floor,
// 1 ceil, 2 rceil, 3 even, 4 nearest (formats::mx_rule order).
NUMPROBE_HD int mx_exponent_rule(int rule, double a, double elem_max, int emax, int mbits) {
  const int fl = std::ilogb(a);
  if (rule == 0) return fl - emax;
  if (rule == 1) return fl + (std::ldexp(1.0, fl) == a ? 0 : 1) - emax;
  if (rule == 2) {
    int x = fl - std::ilogb(elem_max);
    while (std::ldexp(elem_max, x) < a) ++x;
    while (std::ldexp(elem_max, x - 1) >= a) --x;
    return x;
  }
  return mx_exponent_rounded(rule, a, fl, emax, mbits);
}

}  // namespace numprobe::gpu::codec
