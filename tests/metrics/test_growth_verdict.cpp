// The growth verdict (issue 14 item 5, issue 15 item 5) on exact synthetic series: the slope
// and its standard error are known in closed form, so the expected verdicts follow from the
// stated rule (growth_fit.hpp), not from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "numprobe/core/bound.hpp"
#include "numprobe/metrics/growth_fit.hpp"

using namespace numprobe;

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// Key tiles 1..64, three lengths per tile count as drift's --points tile places them.
std::vector<double> tile_axis() {
  std::vector<double> x;
  for (double k : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0})
    for (double d : {0.0, 0.0, 1.0}) x.push_back(k + d);
  return x;
}

std::vector<double> power_law(const std::vector<double>& x, double c, double slope) {
  std::vector<double> y;
  for (double v : x) y.push_back(c * std::pow(v, slope));
  return y;
}

}  // namespace

TEST(growth_verdict, a_known_power_law_grows_with_its_exact_slope) {
  const auto x = tile_axis();
  const auto g = metrics::fit_growth(x, power_law(x, 2e-3, 0.6), power_law(x, 0.9, 0.6));
  EXPECT_NEAR(g.slope, 0.6, 1e-12);
  EXPECT_NEAR(g.slope_stderr, 0.0, 1e-12);
  EXPECT_NEAR(g.ratio.slope, 0.6, 1e-12);
  EXPECT_NEAR(g.error.range_growth, std::pow(65.0, 0.6), 1e-9);  // x spans 1..65
  EXPECT_EQ(g.error.verdict, "grows");
  EXPECT_EQ(g.ratio.verdict, "grows");
  EXPECT_EQ(g.verdict, "grows");
  EXPECT_EQ(g.points, 21);
  EXPECT_EQ(g.ratio.points, 21);
}

TEST(growth_verdict, a_constant_with_seeded_noise_is_flat_for_every_seed) {
  // 10% log-normal jitter around a constant error and a constant ratio of 0.9: no trend.
  const auto x = tile_axis();
  for (unsigned seed = 1; seed <= 50; ++seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> z(0.0, 0.1);
    std::vector<double> e, r;
    for (std::size_t i = 0; i < x.size(); ++i) {
      e.push_back(1e-3 * std::exp(z(rng)));
      r.push_back(0.9 * std::exp(z(rng)));
    }
    const auto g = metrics::fit_growth(x, e, r);
    EXPECT_EQ(g.verdict, "flat") << "seed " << seed << " slope " << g.slope << " ratio slope " << g.ratio.slope;
  }
}

TEST(growth_verdict, one_or_two_points_are_insufficient_and_fail_growth_bounds) {
  const bound slope_bound = parse_bound("growth.slope<=0.25");
  const bound ratio_bound = parse_bound("growth.ratio_slope<=0.15");
  for (std::size_t n : {0u, 1u, 2u}) {
    std::vector<double> x{4, 16}, e{1e-3, 1e-3}, r{0.9, 27.0};  // issue 15: ratio 27, "flat"
    x.resize(n), e.resize(n), r.resize(n);
    const auto g = metrics::fit_growth(x, e, r);
    EXPECT_EQ(g.verdict, "insufficient") << n << " points";
    EXPECT_EQ(g.error.verdict, "insufficient");
    EXPECT_EQ(g.ratio.verdict, "insufficient");
    EXPECT_TRUE(std::isnan(g.slope));
    EXPECT_TRUE(std::isnan(g.ratio.slope));
    ASSERT_TRUE(metrics::growth_metric(g, "growth.slope").has_value());
    EXPECT_FALSE(slope_bound.holds(*metrics::growth_metric(g, "growth.slope")));
    EXPECT_FALSE(ratio_bound.holds(*metrics::growth_metric(g, "growth.ratio_slope")));
  }
  // The one-series form (softmax) follows the same rule.
  EXPECT_EQ(metrics::fit_growth({1, 2}, {1e-3, 2e-3}).verdict, "insufficient");
}

TEST(growth_verdict, unusable_points_do_not_count_toward_three) {
  // Five lengths, but only two finite errors; and three points at one x have no slope.
  const auto g = metrics::fit_growth({1, 2, 4, 8, 16}, {k_nan, 1e-3, k_nan, 2e-3, k_nan},
                                     {k_nan, 1.0, std::numeric_limits<double>::infinity(), 2.0, k_nan});
  EXPECT_EQ(g.points, 2);
  EXPECT_EQ(g.verdict, "insufficient");
  EXPECT_EQ(metrics::fit_growth({8, 8, 8}, {1e-3, 2e-3, 4e-3}).verdict, "insufficient");
  // Three finite points: a verdict (the old test's NaN-skipping case stays flat).
  EXPECT_EQ(metrics::fit_growth({1, 2, 4, 8}, {1e-3, 1e-3, k_nan, 1e-3}).verdict, "flat");
}

TEST(growth_verdict, an_exactly_zero_error_is_flat) {
  // The reference backend against itself: rel_rms 0 and ratio 0 at every length.
  const auto g = metrics::fit_growth({1, 2, 4, 8}, {0, 0, 0, 0}, {0, 0, 0, 0});
  EXPECT_EQ(g.verdict, "flat");
  EXPECT_EQ(g.slope, 0.0);
  EXPECT_EQ(g.ratio.slope, 0.0);
}

TEST(growth_verdict, diffuse_rows_with_falling_error_and_rising_ratio_grow) {
  // Issue 14: l held in bf16 under --dist diffuse. rel_rms falls as x^-0.2 while the naive
  // baseline falls as x^-0.5, so the ratio rises as x^0.3, from 0.89 at one tile.
  const auto x = tile_axis();
  const auto g = metrics::fit_growth(x, power_law(x, 1.6e-3, -0.2), power_law(x, 0.89, 0.3));
  EXPECT_NEAR(g.slope, -0.2, 1e-12);
  EXPECT_EQ(g.error.verdict, "flat");
  EXPECT_NEAR(g.ratio.slope, 0.3, 1e-12);
  EXPECT_NEAR(g.ratio.fitted_at_max, 0.89 * std::pow(65.0, 0.3), 1e-9);  // 3.11: above 1
  EXPECT_EQ(g.ratio.verdict, "grows");
  EXPECT_EQ(g.verdict, "grows");
}

TEST(growth_verdict, a_rising_ratio_that_stays_below_the_naive_baseline_is_flat) {
  // A kernel more precise than the naive baseline (ratio 0.01 .. 0.035): the ratio rises only
  // because the baseline's error falls toward the output rounding both share.
  const auto x = tile_axis();
  const auto g = metrics::fit_growth(x, power_law(x, 1e-5, 0.0), power_law(x, 0.01, 0.3));
  EXPECT_EQ(g.ratio.verdict, "flat");
  EXPECT_EQ(g.verdict, "flat");
}

TEST(growth_verdict, a_short_range_cannot_alarm_on_a_steep_slope) {
  // x from 10 to 11 tiles: slope 2 exactly, yet the fitted growth over the sweep is
  // 1.1^2 = 1.21x, under the 1.5x minimum.
  const std::vector<double> x{10, 10.5, 11};
  const auto g = metrics::fit_growth(x, power_law(x, 1e-3, 2.0), power_law(x, 2.0, 2.0));
  EXPECT_NEAR(g.slope, 2.0, 1e-12);
  EXPECT_NEAR(g.error.range_growth, 1.21, 1e-12);
  EXPECT_EQ(g.verdict, "flat");
  // The same slope over 1..8 tiles grows (64x).
  const std::vector<double> wide{1, 2, 4, 8};
  EXPECT_EQ(metrics::fit_growth(wide, power_law(wide, 1e-3, 2.0)).verdict, "grows");
}

TEST(growth_verdict, the_slope_must_clear_three_and_a_half_standard_errors) {
  // x = 1, 2, 4, 8, 16 and log-residuals d * (1, -1, 0, -1, 1), orthogonal to 1 and to log x:
  // the least-squares slope is 0.5 exactly, and its standard error is
  // sqrt(4 d^2 / 3 / (10 ln(2)^2)) = 0.52680 d.
  const std::vector<double> x{1, 2, 4, 8, 16};
  const double pattern[] = {1, -1, 0, -1, 1};
  auto series = [&](double d) {
    std::vector<double> y;
    for (std::size_t i = 0; i < x.size(); ++i) y.push_back(1e-3 * std::sqrt(x[i]) * std::exp(d * pattern[i]));
    return y;
  };
  const auto noisy = metrics::fit_growth(x, series(0.38));  // stderr 0.2002: 0.5 - 2*se > 0 > 0.5 - 3.5*se
  EXPECT_NEAR(noisy.slope, 0.5, 1e-12);
  EXPECT_NEAR(noisy.slope_stderr, 0.52680 * 0.38, 1e-4);
  EXPECT_EQ(noisy.verdict, "flat");
  const auto clear = metrics::fit_growth(x, series(0.20));  // stderr 0.1054: 0.5 - 3.5*se = 0.13
  EXPECT_NEAR(clear.slope_stderr, 0.52680 * 0.20, 1e-4);
  EXPECT_EQ(clear.verdict, "grows");
}

TEST(growth_verdict, decode_sweeps_report_the_most_severe_series) {
  const auto x = tile_axis();
  const auto flat = metrics::fit_growth(x, power_law(x, 1e-3, 0.1), power_law(x, 0.9, 0.0));
  const auto grows = metrics::fit_growth(x, power_law(x, 1e-3, -0.2), power_law(x, 0.9, 0.4));
  const auto insufficient = metrics::fit_growth({1, 2}, {1e-3, 1e-3}, {1, 1});
  ASSERT_EQ(flat.verdict, "flat");
  ASSERT_EQ(grows.verdict, "grows");
  EXPECT_TRUE(metrics::more_severe(grows, flat));  // though flat has the steeper rel_rms slope
  EXPECT_FALSE(metrics::more_severe(flat, grows));
  EXPECT_TRUE(metrics::more_severe(insufficient, flat));
  EXPECT_TRUE(metrics::more_severe(grows, insufficient));
}

TEST(growth_verdict, gate_metric_names) {
  EXPECT_TRUE(metrics::is_growth_metric("growth.slope"));
  EXPECT_TRUE(metrics::is_growth_metric("growth.ratio_slope"));
  EXPECT_FALSE(metrics::is_growth_metric("growth.verdict"));
  const auto x = tile_axis();
  const auto g = metrics::fit_growth(x, power_law(x, 1e-3, 0.1), power_law(x, 0.9, 0.4));
  EXPECT_NEAR(*metrics::growth_metric(g, "growth.slope"), 0.1, 1e-12);
  EXPECT_NEAR(*metrics::growth_metric(g, "growth.ratio_slope"), 0.4, 1e-12);
  EXPECT_FALSE(metrics::growth_metric(g, "rel_rms").has_value());
  // A one-series fit has no ratio: a ratio bound on it fails.
  EXPECT_TRUE(std::isnan(*metrics::growth_metric(metrics::fit_growth(x, power_law(x, 1e-3, 0.1)),
                                                 "growth.ratio_slope")));
}
