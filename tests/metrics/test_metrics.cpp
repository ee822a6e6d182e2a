// Metric definitions checked on hand-built outputs whose errors are known exactly.
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

#include "numprobe/core/bound.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/metrics/attention_errors.hpp"
#include "numprobe/metrics/growth_fit.hpp"

using namespace numprobe;

namespace {

attention_output make(std::vector<double> o, std::vector<double> lse, std::int64_t heads,
                      std::int64_t d) {
  attention_output out;
  out.heads = heads;
  out.head_dim = d;
  out.o = std::move(o);
  out.lse = std::move(lse);
  for (std::size_t r = 0; r < out.lse.size() / static_cast<std::size_t>(heads); ++r)
    out.rows.push_back(static_cast<std::int64_t>(r));
  return out;
}

}  // namespace

TEST(attention_errors, rel_rms_and_max_abs_are_exact_on_a_3_4_5_triangle) {
  // ref (3, 4) has norm 5; cand differs by 0.5 in one element: rel_rms = 0.5 / 5 = 0.1.
  const auto ref = make({3.0, 4.0}, {1.0}, 1, 2);
  const auto cand = make({3.0, 4.5}, {1.25}, 1, 2);
  const auto e = metrics::compare_attention(cand, ref, formats::format_id::m_f32);
  EXPECT_DOUBLE_EQ(e.rel_rms, 0.1);
  EXPECT_DOUBLE_EQ(e.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(e.max_rel, 0.125);  // 0.5 / 4
  EXPECT_DOUBLE_EQ(e.lse_max_abs, 0.25);
  // f32 ulp at 4 is 2^-21: 0.5 / 2^-21 = 2^20 ulps.
  EXPECT_DOUBLE_EQ(e.max_ulp, std::ldexp(1.0, 20));
  EXPECT_EQ(e.nan_count, 0);
}

TEST(attention_errors, nan_in_candidate_is_counted_and_never_passes) {
  const auto ref = make({1.0, 2.0, 3.0, 4.0}, {0.5, 0.5}, 2, 2);
  auto cand = ref;
  cand.o[2] = std::numeric_limits<double>::quiet_NaN();
  const auto e = metrics::compare_attention(cand, ref, formats::format_id::m_bf16);
  EXPECT_EQ(e.nan_count, 1);
  EXPECT_TRUE(std::isinf(e.rel_rms));
  EXPECT_FALSE(parse_bound("rel_rms<=1e300").holds(e.rel_rms));
  EXPECT_TRUE(std::isinf(e.per_row[1].rel_rms));
  EXPECT_EQ(e.per_row[0].rel_rms, 0.0);
}

TEST(attention_errors, masked_rows_with_matching_minus_inf_lse_have_zero_lse_error) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const auto ref = make({0.0, 0.0}, {ninf}, 1, 2);
  auto cand = ref;
  EXPECT_EQ(metrics::compare_attention(cand, ref, formats::format_id::m_bf16).lse_max_abs, 0.0);
  cand.lse[0] = 0.0;  // a kernel that reports a finite LSE for a fully masked row
  const auto e = metrics::compare_attention(cand, ref, formats::format_id::m_bf16);
  EXPECT_EQ(e.lse_mismatch_inf, 1);
  EXPECT_TRUE(std::isinf(e.lse_max_abs));
}

TEST(attention_errors, ulp_at_follows_the_format_grid) {
  // bf16 has 7 fraction bits: ulp(1) = 2^-7; at 300 (binade 2^8) ulp = 2.
  EXPECT_EQ(metrics::ulp_at(formats::format_id::m_bf16, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(metrics::ulp_at(formats::format_id::m_bf16, 300.0), 2.0);
  // fp16 subnormal quantum 2^-24 below the min normal 2^-14.
  EXPECT_EQ(metrics::ulp_at(formats::format_id::m_f16, 1e-6), std::ldexp(1.0, -24));
}

TEST(growth_fit, recovers_an_exact_power_law_slope) {
  // y = 3 x^0.5: slope 0.5 exactly, zero residual; above the 0.25 threshold -> grows.
  std::vector<double> x{1, 2, 4, 8, 16, 32}, y;
  for (double v : x) y.push_back(3.0 * std::sqrt(v));
  const auto g = metrics::fit_growth(x, y);
  EXPECT_NEAR(g.slope, 0.5, 1e-12);
  EXPECT_NEAR(g.slope_stderr, 0.0, 1e-12);
  EXPECT_EQ(g.verdict, "grows");
}

TEST(growth_fit, constant_error_is_flat_and_nan_points_are_skipped) {
  std::vector<double> x{1, 2, 4, 8}, y{1e-3, 1e-3, std::numeric_limits<double>::quiet_NaN(), 1e-3};
  const auto g = metrics::fit_growth(x, y);
  EXPECT_EQ(g.points, 3);
  EXPECT_NEAR(g.slope, 0.0, 1e-12);
  EXPECT_EQ(g.verdict, "flat");
}

TEST(growth_fit, a_noisy_slope_below_significance_is_flat) {
  // Slope 0.3 on average but with residuals large enough that 2 standard errors cover 0.
  std::vector<double> x{1, 2, 4, 8, 16}, y{1.0, 8.0, 0.5, 6.0, 3.0};
  const auto g = metrics::fit_growth(x, y);
  EXPECT_GT(g.slope_stderr * 2.0, g.slope);
  EXPECT_EQ(g.verdict, "flat");
}

TEST(bound, parses_operators_and_rejects_garbage) {
  const auto b = parse_bound("ratio_to_naive<=2");
  EXPECT_EQ(b.metric, "ratio_to_naive");
  EXPECT_EQ(b.value, 2.0);
  EXPECT_TRUE(b.holds(2.0));
  EXPECT_FALSE(b.holds(2.0000001));
  EXPECT_FALSE(b.holds(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(parse_bound("top1>=0.99").holds(0.995));
  EXPECT_FALSE(parse_bound("kld.p99<0.05").holds(0.05));
  for (const char* bad : {"rel_rms", "<=3", "rel_rms<=abc", "rel rms<=1", "x<=inf", "x<=1e"})
    EXPECT_THROW((void)parse_bound(bad), numprobe::error) << bad;
}
