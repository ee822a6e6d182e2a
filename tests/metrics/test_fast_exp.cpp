// The vectorised exp of the KL pass (src/metrics/fast_exp.hpp) against expl (x87 long double,
// 11 more bits than double: its own error is < 2^-11 double ulp), over its whole domain x <= 0:
// seeded random points across [-708, 0], dense points near 0, points straddling each
// reduction boundary (k + 1/2) ln 2, the subnormal band and the underflow edge, and the values
// the KL pass meets on extreme logits (x - max x for f32 logits as large as 3e38).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "numprobe/base/rng.hpp"
#include "src/metrics/fast_exp.hpp"

namespace {

namespace fe = numprobe::metrics::fast_exp;

// Error of y against the exact value e, in units of the last place of e's binade.
double ulps(double y, long double e) {
  const double ed = static_cast<double>(e);
  const double ulp = std::ldexp(1.0, std::ilogb(ed) - 52);
  return static_cast<double>(std::fabs(static_cast<long double>(y) - e) / ulp);
}

std::vector<double> domain_points() {
  std::vector<double> x;
  for (std::uint64_t i = 0; i < 400000; ++i)  // uniform over the normal-result range
    x.push_back(-708.0 * numprobe::uniform_open01(7, 1, i));
  for (std::uint64_t i = 0; i < 100000; ++i)  // near 0, where most probabilities live
    x.push_back(-std::ldexp(0.5 + 0.5 * numprobe::uniform_open01(7, 2, i), -static_cast<int>(i % 60)));
  for (int k = 0; k <= 1020; ++k) {  // both sides of each rounding boundary of k (to -707.7)
    const double b = -(k + 0.5) * 0.6931471805599453;
    for (int d = -3; d <= 3; ++d) x.push_back(b + d * std::ldexp(std::fabs(b), -50));
    x.push_back(-k * 0.6931471805599453);
  }
  x.push_back(-708.0);  // the last normal-path point
  x.push_back(0.0);
  x.push_back(-0.0);
  x.push_back(-DBL_MIN);
  x.push_back(-std::numeric_limits<double>::denorm_min());
  return x;
}

#if NUMPROBE_FAST_EXP_AVX2
double vec_exp(double x) {
  alignas(32) double o[4];
  _mm256_store_pd(o, fe::exp_neg(_mm256_set_pd(-1.0, x, -3.0, -800.0)));
  return o[2];
}
#endif

TEST(fast_exp, within_two_ulp_of_expl_on_normal_results) {
  double worst = 0, at = 0;
  for (double x : domain_points()) {
    const long double e = expl(static_cast<long double>(x));
    const double y = fe::exp_neg(x);
    const double u = ulps(y, e);
    if (u > worst) worst = u, at = x;
#if NUMPROBE_FAST_EXP_AVX2
    // The vector form is the same algorithm lane by lane: bit-identical.
    const double yv = vec_exp(x);
    ASSERT_EQ(std::memcmp(&y, &yv, 8), 0) << "x=" << x;
#endif
  }
  // The bound stated in fast_exp.hpp: < 1 ulp (the Taylor remainder is < u / 25, the argument
  // reduction is exact to ~u / 2 of r, and 13 Horner FMAs on |r| <= 0.35 add under 1 ulp;
  // measured 0.85 ulp).
  RecordProperty("max_ulp", std::to_string(worst));
  std::printf("fast_exp: max error %.3f ulp at x = %.17g\n", worst, at);
  EXPECT_LT(worst, 1.0) << "at x=" << at;
  EXPECT_GT(worst, 0.0);  // a measurement, not an identity
}

TEST(fast_exp, subnormal_band_and_underflow_match_std_exp) {
  std::vector<double> x;
  for (std::uint64_t i = 0; i < 20000; ++i) x.push_back(-708.0 - 37.5 * numprobe::uniform_open01(9, 1, i));
  for (double v : {-708.0000001, -745.13321910194110, -745.13321910194122, -745.4999,
                   -745.5, -745.5000001, -746.0, -1e4, -3.4e38, -6.8e38, -1e308,
                   -std::numeric_limits<double>::infinity()})
    x.push_back(v);
  for (double v : x) {
    const double want = v < -745.5 ? 0.0 : std::exp(v);
    const double got = fe::exp_neg(v);
    ASSERT_EQ(std::memcmp(&got, &want, 8), 0) << "x=" << v << " got " << got << " want " << want;
#if NUMPROBE_FAST_EXP_AVX2
    const double gv = vec_exp(v);
    ASSERT_EQ(std::memcmp(&gv, &want, 8), 0) << "x=" << v;
#endif
  }
  // Below -745.5 std::exp is 0 too (exp(-745.5) < 2^-1075, half the smallest subnormal).
  EXPECT_EQ(std::exp(-745.5), 0.0);
}

TEST(fast_exp, exact_at_zero) {
  EXPECT_EQ(fe::exp_neg(0.0), 1.0);
  EXPECT_EQ(fe::exp_neg(-0.0), 1.0);
}

}  // namespace
