#pragma once
// exp(x) for x <= 0 in double, four lanes at a time (AVX2 + FMA, the x86-64-v3 build target),
// for the KL pass, which needs two exponentials per vocabulary entry.
//
// Method: k = round(x / ln 2), r = x - k ln2_hi - k ln2_lo (|r| <= ln2 / 2; ln2_hi has 32
// trailing zero bits, so k ln2_hi is exact for |k| < 2^20), exp(r) by the degree-13 Taylor
// polynomial in Horner form with FMA (truncation r^14 / 14! < 4.3e-18 < u / 25 at |r| = ln2/2),
// and 2^k added to the exponent field.
//
// Error bound (tests/metrics/test_fast_exp.cpp checks it against expl over the whole domain,
// densely near 0 and near the underflow boundary, and at the extreme logits the KL pass sees):
// - normal results (x >= -708): error < 1 ulp (measured maximum 0.85 ulp over ~510,000
//   points; the Taylor remainder is < u/25, the reduction exact to ~u/2 of r, Horner ~1 ulp);
// - x in [-745.5, -708): the result is std::exp(x) itself (subnormal or 0; a rare lane-wise
//   fallback, since scaling by 2^k would leave the normal range);
// - x < -745.5: exactly 0, which is also std::exp's correctly rounded value there (the true
//   value is below half the smallest subnormal, 2^-1075 = exp(-745.13...)).
// The domain is x <= 0 (finite or -inf); KL passes call it on x - max(x). x > 0 is not
// supported (no overflow handling).
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define NUMPROBE_FAST_EXP_AVX2 1
#endif

namespace numprobe::metrics::fast_exp {

inline constexpr double k_log2e = 1.4426950408889634;         // 1 / ln 2
inline constexpr double k_ln2_hi = 6.93147180369123816490e-01;  // 0x3fe62e42fee00000
inline constexpr double k_ln2_lo = 1.90821492927058770002e-10;  // ln 2 - ln2_hi
inline constexpr double k_shifter = 0x1.8p52;                  // round-to-nearest integer trick
inline constexpr double k_normal_limit = -708.0;    // below: 2^k leaves the normal range
inline constexpr double k_zero_limit = -745.5;      // below: exp rounds to 0

// 1/n! for n = 13 ... 0, Horner order.
inline constexpr double k_c[14] = {
    1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
    1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
    1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        0.5,
    1.0,                1.0};

// The scalar form of the same algorithm, operation for operation (std::fma is the FMA the
// vector form uses), so a row's tail gives what a full vector would.
inline double exp_neg(double x) {
  if (!(x >= k_normal_limit)) return x < k_zero_limit ? 0.0 : std::exp(x);  // -inf -> 0
  const double kf = std::fma(x, k_log2e, k_shifter);
  const double k = kf - k_shifter;
  double r = std::fma(-k, k_ln2_hi, x);
  r = std::fma(-k, k_ln2_lo, r);
  double p = k_c[0];
  for (int i = 1; i < 14; ++i) p = std::fma(p, r, k_c[i]);
  std::int64_t kb = 0, pb = 0;
  std::memcpy(&kb, &kf, 8);
  std::memcpy(&pb, &p, 8);
  pb += static_cast<std::int64_t>(static_cast<std::uint64_t>(kb) << 52);
  double out = 0;
  std::memcpy(&out, &pb, 8);
  return out;
}

#if NUMPROBE_FAST_EXP_AVX2
// Four lanes of exp_neg; each lane's result equals exp_neg of that lane.
inline __m256d exp_neg(__m256d x) {
  const __m256d kf = _mm256_fmadd_pd(x, _mm256_set1_pd(k_log2e), _mm256_set1_pd(k_shifter));
  const __m256d k = _mm256_sub_pd(kf, _mm256_set1_pd(k_shifter));
  __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(k_ln2_hi), x);
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(k_ln2_lo), r);
  __m256d p = _mm256_set1_pd(k_c[0]);
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[1]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[2]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[3]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[4]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[5]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[6]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[7]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[8]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[9]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[10]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[11]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[12]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(k_c[13]));
  const __m256i scale = _mm256_slli_epi64(_mm256_castpd_si256(kf), 52);
  __m256d out = _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(p), scale));
  // Lanes below -745.5 (and -inf) are 0; lanes in [-745.5, -708) are subnormal results,
  // rare, so handled one by one with std::exp.
  const __m256d zero = _mm256_cmp_pd(x, _mm256_set1_pd(k_zero_limit), _CMP_LT_OQ);
  out = _mm256_andnot_pd(zero, out);
  const __m256d low = _mm256_andnot_pd(
      zero, _mm256_cmp_pd(x, _mm256_set1_pd(k_normal_limit), _CMP_LT_OQ));
  if (_mm256_movemask_pd(low) != 0) [[unlikely]] {
    alignas(32) double xs[4], os[4];
    _mm256_store_pd(xs, x);
    _mm256_store_pd(os, out);
    for (int i = 0; i < 4; ++i)
      if (xs[i] < k_normal_limit && xs[i] >= k_zero_limit) os[i] = std::exp(xs[i]);
    out = _mm256_load_pd(os);
  }
  return out;
}
#endif

}  // namespace numprobe::metrics::fast_exp
