#pragma once
// Element and scale codecs of the quantize kernels, bit-exact with numprobe::formats (the
// reference codec, which rounds exactly from double). Plain C++ usable on the host too (no vendor
// headers), so the software paths are checked against the reference on any machine
// (tests/gpu/test_gpu_quantize.cpp, "host codec" tests).
//
// How exactness is reached without double arithmetic per element:
// - The per-block scale is computed once per block in double, with the same operations the
//   reference performs (amax / max in double, then one rounding to the scale format).
// - An element t = v / s is formed by `div_round_odd`: the fp32 quotient rounded to odd (toward
//   zero, sticky bit in the last place). A round-to-odd value with p bits, rounded again RNE to
//   q <= p - 2 bits, equals the direct RNE rounding of the exact quotient (Boldo-Melquiond), so
//   cvt/RNE to e4m3 (4 bits), e2m1 (2 bits) or an integer below 2^21 is exact.
// - NVFP4's divisor s_b * s_t has 28 significant bits (not a float), so its elements are coded
//   by comparing |v| with the exact decision points m_k * s_b * s_t, each held as a float pair
//   hi + lo (exact); ties are detected exactly and go to the even code.
#include <cstdint>
#include <cstring>
#include <cmath>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define NUMPROBE_HD __host__ __device__ __forceinline__
#define NUMPROBE_HD_UNROLL _Pragma("unroll")
#else
#define NUMPROBE_HD inline
#define NUMPROBE_HD_UNROLL
#endif

namespace numprobe::gpu::codec {

NUMPROBE_HD std::uint32_t f2u(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
NUMPROBE_HD float u2f(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// x / y rounded to odd in fp32: the toward-zero quotient with its last bit set when inexact.
// Built from the IEEE quotient and its exact fma remainder, identical for CUDA and HIP.
NUMPROBE_HD float div_round_odd(float x, float y) {
  const float q = x / y;
  if (!(std::fabs(q) <= 3.0e38f) || q == 0.0f) return q;  // inf/nan, or exact zero/underflow
  const float r = std::fma(-q, y, x);                     // exact: x - q y
  if (r == 0.0f) return q;
  // exact - q = r / y; |q| too large when that has the opposite sign of q.
  const bool exact_above = (r > 0.0f) == (y > 0.0f);
  const bool mag_over = (q > 0.0f) ? !exact_above : exact_above;
  std::uint32_t b = f2u(q);
  if (mag_over) b -= 1;
  return u2f(b | 1u);
}

// The same value as div_round_odd(x, y) from a reciprocal ry = RN(1 / y) computed once per
// block: q0 = x ry, one Newton step q = q0 + (x - q0 y) ry gives a faithful quotient, whose fma
// remainder is then exact (Markstein), and the round-to-odd step is the same. Valid when y and
// 1/y are normal (the caller passes ry = 0 otherwise); elements whose remainder could underflow
// (|x| < 2^-100) or whose quotient is outside [2^-100, 2^100] take the division path.
NUMPROBE_HD float div_round_odd_rcp(float x, float y, float ry) {
  const float q0 = x * ry;
  const float aq = std::fabs(q0);
  if (ry == 0.0f || !(std::fabs(x) >= 0x1.0p-100f) || !(aq >= 0x1.0p-100f && aq <= 0x1.0p100f))
    return div_round_odd(x, y);
  const float r0 = std::fma(-q0, y, x);
  const float q = std::fma(r0, ry, q0);
  const float r = std::fma(-q, y, x);  // exact: q is faithful
  if (r == 0.0f) return q;
  const bool exact_above = (r > 0.0f) == (y > 0.0f);
  const bool mag_over = (q > 0.0f) ? !exact_above : exact_above;
  std::uint32_t b = f2u(q);
  if (mag_over) b -= 1;
  return u2f(b | 1u);
}
// The reciprocal div_round_odd_rcp takes for a block scale y > 0 (0: use the division path).
NUMPROBE_HD float block_reciprocal(float y) {
  return (y >= 0x1.0p-120f && y <= 0x1.0p120f) ? 1.0f / y : 0.0f;
}

// Whether the e4m3 code of q0 is the code of the exact quotient x = v / s, when q0 = RN(v * rs)
// with rs = RN(1 / s) (or any normal rs within a relative 2u of 1 / s, u = 2^-24): then
// |q0 - x| <= |x| (3u + 2u^2), under 3.01 fp32 steps of x's binade. The code changes between q0
// and x only if an e4m3 RNE decision point (a midpoint between neighbouring codes) lies between
// them. Those points sit at least 2^19 steps from every binade edge except 2^-10 (the tie between
// 0 and the smallest subnormal 2^-9, handled apart), so such a point is in q0's binade within
// 3.01 steps of q0: q0 decides the code when its discarded bits are at least 5 steps from the
// midpoint pattern of its binade. (When q0 underflows, |x| < 2^-120.) Saturation needs no check:
// every value above 448 codes 448 (0x7E) with satfinite, exactly as the reference saturates.
//   |q0| >= 2^-6: 3 kept mantissa bits, midpoint field 0x80000 of 20 discarded bits;
//   2^-9 <= |q0| < 2^-6 (e4m3 subnormals, quantum 2^-9): k = e + 9 kept bits;
//   2^-11 <= |q0| < 2^-9: undecided (the 2^-10 tie is near); |q0| < 2^-11: code 0 (|x| < 2^-10).
// Undecided elements take div_round_odd (a few per million on typical data).
NUMPROBE_HD bool e4m3_decided(float q0) {
  const std::uint32_t b = f2u(q0) & 0x7FFFFFFFu;
  if (b >= 0x3C800000u) return ((b + (4u - 0x80000u)) & 0xFFFFFu) > 8u;
  if (b < 0x3A000000u) return true;
  if (b < 0x3B000000u) return false;
  const int shift = 23 - (static_cast<int>(b >> 23) - 127 + 9);  // 21..23
  const std::uint32_t mask = (1u << shift) - 1u, mid = 1u << (shift - 1);
  return ((b + 4u - mid) & mask) > 8u;
}

// The fp32 value the e4m3 encoder needs for x = v / s: q0 = v * rs where that decides the code
// (e4m3_decided), else the round-to-odd quotient. rs = block_reciprocal(s) (0: always divide).
// encode_e4m3(result) equals the RNE e4m3 code of the exact quotient (saturating), as
// encode_e4m3(div_round_odd(v, s)) does; NaN inputs give NaN (the caller codes them).
NUMPROBE_HD float e4m3_quotient(float v, float s, float rs) {
  const float q0 = v * rs;
  if (rs != 0.0f && e4m3_decided(q0)) return q0;
  return s == 0.0f ? 0.0f : div_round_odd(v, s);
}

// A double rounded to odd in fp32 (for the one rounding from double a scale needs).
NUMPROBE_HD float double_round_odd(double d) {
  const float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || d != d) return f;
  std::uint32_t b = f2u(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) b -= 1;
  return u2f(b | 1u);
}

// Generic small-float encoder: |a| (finite, rounded to odd or exact) to a format with E exponent
// bits, M mantissa bits, bias B, RNE, saturating at max_code (the magnitude code of max finite).
// Returns the magnitude code; the caller adds the sign.
template <int M, int Bias>
NUMPROBE_HD std::uint32_t encode_small_mag(float a, std::uint32_t max_code) {
  constexpr int emin = 1 - Bias;  // exponent of the smallest normal
  const std::uint32_t b = f2u(a);
  const int e = static_cast<int>((b >> 23) & 0xFF) - 127;
  std::uint32_t code;
  if (e < emin) {
    // Subnormal range of the target (or zero): fixed quantum 2^(emin - M). Scaling by a power
    // of two is exact; rintf is RNE. A result of 2^M is the smallest normal (code 2^M).
    const float scaled = a * u2f(static_cast<std::uint32_t>(127 - emin + M) << 23);
    code = static_cast<std::uint32_t>(std::rint(scaled));
  } else {
    constexpr int shift = 23 - M;
    std::uint32_t m = b + ((1u << (shift - 1)) - 1u) + ((b >> shift) & 1u);  // RNE, carries up
    m >>= shift;
    code = m - (static_cast<std::uint32_t>(127 - Bias) << M);
    if (e - Bias > 30) code = max_code + 1;  // far beyond any small format
  }
  return code > max_code ? max_code : code;
}

// e4m3fn (OCP): bias 7, max 448 = 0x7E, NaN 0x7F/0xFF (sign kept, as the reference).
NUMPROBE_HD std::uint32_t encode_e4m3_sw(float t) {
  const std::uint32_t s = (f2u(t) >> 24) & 0x80u;
  if (t != t) return s | 0x7Fu;
  const float a = std::fabs(t);
  if (a > 1.0e30f) return s | 0x7Eu;  // inf saturates
  return s | encode_small_mag<3, 7>(a, 0x7Eu);
}
// e2m1: bias 1, max 6 = 0x7; no NaN (the caller codes NaN inputs).
NUMPROBE_HD std::uint32_t encode_e2m1_sw(float t) {
  const std::uint32_t s = (f2u(t) >> 28) & 0x8u;
  const float a = std::fabs(t);
  if (a > 1.0e30f) return s | 0x7u;
  return s | encode_small_mag<1, 1>(a, 0x7u);
}
// Signed int4: clamp(rint(t), -8, 7), two's complement nibble.
NUMPROBE_HD std::uint32_t encode_i4(float t) {
  float r = std::rint(t);
  r = r < -8.0f ? -8.0f : (r > 7.0f ? 7.0f : r);
  return static_cast<std::uint32_t>(static_cast<int>(r)) & 0xFu;
}

NUMPROBE_HD float decode_e4m3(std::uint32_t c) {
  const std::uint32_t e = (c >> 3) & 0xF, m = c & 7;
  float v = e == 0 ? static_cast<float>(m) * 0x1.0p-9f
                   : u2f(((e + 120u) << 23) | (m << 20));
  return (c & 0x80u) ? -v : v;
}

// ------------------------------------------------------------------ scales (double -> format)
// Scale formats of the kernels; codes as numprobe::formats::encode gives them.
enum class scale_fmt : std::uint8_t { m_f32, m_f16, m_e4m3, m_e8m0 };

struct scale_value {
  float value;          // the effective multiplier (exact)
  std::uint32_t code;   // as stored
};

// IEEE fp16 from a float already rounded to odd (or exact): RNE, saturating at 65504.
NUMPROBE_HD std::uint32_t encode_f16_sat(float a_signed) {
  const std::uint32_t s = (f2u(a_signed) >> 16) & 0x8000u;
  const float a = std::fabs(a_signed);
  if (a != a) return 0x7E00u | s;
  if (a > 1.0e30f) return s | 0x7BFFu;
  return s | encode_small_mag<10, 15>(a, 0x7BFFu);
}
NUMPROBE_HD float decode_f16(std::uint32_t c) {
  const std::uint32_t e = (c >> 10) & 0x1F, m = c & 0x3FF;
  float v = e == 0 ? static_cast<float>(m) * 0x1.0p-24f : u2f(((e + 112u) << 23) | (m << 13));
  return (c & 0x8000u) ? -v : v;
}

// store_scale of the reference: e8m0 rounds up to a power of two (clamped to [2^-127, 2^127]),
// the others round to nearest (saturating). `d` > 0.
NUMPROBE_HD scale_value store_scale(scale_fmt f, double d) {
  switch (f) {
    case scale_fmt::m_e8m0: {
      int e;
      const double fr = std::frexp(d, &e);  // d = fr * 2^e, fr in [0.5, 1)
      int x = e - 1;                        // ilogb
      if (fr != 0.5) ++x;                   // not a power of two: round up
      x = x < -127 ? -127 : (x > 127 ? 127 : x);
      return {static_cast<float>(std::ldexp(1.0, x)), static_cast<std::uint32_t>(x + 127)};
    }
    case scale_fmt::m_f16: {
      const std::uint32_t c = encode_f16_sat(double_round_odd(d));
      return {decode_f16(c), c};
    }
    case scale_fmt::m_e4m3: {
      const std::uint32_t c = encode_e4m3_sw(double_round_odd(d));
      return {decode_e4m3(c), c};
    }
    default: {
      double dd = d > 3.4028234663852886e38 ? 3.4028234663852886e38 : d;
      const float v = static_cast<float>(dd);
      return {v, f2u(v)};
    }
  }
}

// ------------------------------------------------------------------ NVFP4 decision points
// The seven e2m1 midpoints (between magnitudes 0,.5,1,1.5,2,3,4,6) times P = s_b * s_t, each as
// an exact float pair. A magnitude equal to a midpoint is a tie: RNE picks the even code.
struct e2m1_points {
  float hi[7];
  float lo[7];
};
NUMPROBE_HD e2m1_points make_e2m1_points(float sb, float st) {
  constexpr double mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
  e2m1_points p{};
  const double P = static_cast<double>(sb) * static_cast<double>(st);  // exact (28 bits)
  for (int k = 0; k < 7; ++k) {
    const double t = mid[k] * P;  // exact (31 bits)
    p.hi[k] = static_cast<float>(t);
    p.lo[k] = static_cast<float>(t - static_cast<double>(p.hi[k]));  // exact (<= 7 bits)
  }
  return p;
}
// The same decisions as one threshold per midpoint: code = sum_k [|v| >= thr_k], where thr_k is
// hi_k when |v| == hi_k already counts (the exact point lies below hi_k, or it is a tie whose
// upper neighbour is the even code) and the next float above hi_k otherwise.
struct e2m1_thresholds {
  float thr[7];
};
NUMPROBE_HD e2m1_thresholds make_e2m1_thresholds(float sb, float st) {
  const e2m1_points p = make_e2m1_points(sb, st);
  e2m1_thresholds t{};
  for (int k = 0; k < 7; ++k) {
    const float hi = p.hi[k];
    const bool counts_at_hi = p.lo[k] < 0.0f || (p.lo[k] == 0.0f && (k & 1));
    t.thr[k] = (counts_at_hi || !(hi <= 3.4028235e38f)) ? hi : u2f(f2u(hi) + 1u);
  }
  return t;
}
NUMPROBE_HD std::uint32_t encode_e2m1_thresholds(float v, const e2m1_thresholds& t) {
  const std::uint32_t s = (f2u(v) >> 28) & 0x8u;
  const float a = std::fabs(v);
  std::uint32_t c = 0;
NUMPROBE_HD_UNROLL
  for (int k = 0; k < 7; ++k) c += a >= t.thr[k] ? 1u : 0u;
  return s | c;
}

// make_e2m1_thresholds in fp32 arithmetic only (the same thresholds): P = sb * st = hi + lo
// exactly (fma), t_k = m_k P rounds once to hk = fma(m_k, hi, m_k lo) (m_k lo is exact: lo has
// at most 4 significant bits, m_k at most 3), and the sign of t_k - hk is that of
// fma(m_k, hi, -hk) + m_k lo, both steps exact (the operands are multiples of ulp(lo) / 4 below
// 8 ulp(hi)). Valid while nothing over- or underflows: st in [2^-90, 2^90] and sb an e4m3 value
// or 2^X with |X| <= 30 (the caller checks st and falls back to make_e2m1_thresholds).
NUMPROBE_HD e2m1_thresholds make_e2m1_thresholds_f32(float sb, float st) {
  constexpr float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float hi = sb * st;
  const float lo = std::fma(sb, st, -hi);
  e2m1_thresholds t{};
NUMPROBE_HD_UNROLL
  for (int k = 0; k < 7; ++k) {
    const float mlo = mid[k] * lo;
    const float hk = std::fma(mid[k], hi, mlo);
    const float r = std::fma(mid[k], hi, -hk) + mlo;  // sign of t_k - hk
    const bool counts_at_hi = r < 0.0f || (r == 0.0f && (k & 1));
    t.thr[k] = counts_at_hi ? hk : u2f(f2u(hk) + 1u);
  }
  return t;
}
NUMPROBE_HD bool e2m1_thresholds_f32_ok(float st) { return st >= 0x1.0p-90f && st <= 0x1.0p90f; }

// Code of v against the points (P > 0; v finite).
NUMPROBE_HD std::uint32_t encode_e2m1_points(float v, const e2m1_points& p) {
  const std::uint32_t s = (f2u(v) >> 28) & 0x8u;
  const float a = std::fabs(v);
  std::uint32_t c = 0;
NUMPROBE_HD_UNROLL
  for (int k = 0; k < 7; ++k) {
    // a > m_k P, or a tie (a == m_k P) where the upper neighbour k+1 is the even code.
    const bool above = a > p.hi[k] || (a == p.hi[k] && p.lo[k] < 0.0f);
    const bool tie = a == p.hi[k] && p.lo[k] == 0.0f;
    c += (above || (tie && (k & 1))) ? 1u : 0u;
  }
  return s | c;
}

}  // namespace numprobe::gpu::codec
