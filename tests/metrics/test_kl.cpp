// KL statistics against a straightforward double-precision implementation written here, on
// seeded logits that include rows with +-1e4 spreads and rows whose top-1 is tied.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <cmath>
#include <numeric>
#include <vector>

#include "numprobe/base/rng.hpp"
#include "numprobe/metrics/kl.hpp"

namespace {

using numprobe::metrics::compare_row;
using numprobe::metrics::kl_row;
using numprobe::metrics::kl_scratch;
using numprobe::metrics::summarize;

constexpr std::int64_t k_v = 300;

// Row r of the base and candidate: normal logits, with every 7th row spread to +-1e4, and
// every 5th row with a tie for the top (two equal maxima, the candidate keeping the tie).
void make_rows(std::uint64_t seed, std::int64_t r, std::vector<double>& b, std::vector<double>& c) {
  b.resize(k_v);
  c.resize(k_v);
  const double spread = r % 7 == 3 ? 1e4 : 2.0;
  for (std::int64_t i = 0; i < k_v; ++i) {
    b[i] = spread * numprobe::normal_at(seed, 1, r * k_v + i);
    c[i] = b[i] + 0.3 * numprobe::normal_at(seed, 2, r * k_v + i);
  }
  if (r % 5 == 1) {
    const auto m = *std::max_element(b.begin(), b.end()) + 1.0;
    b[17] = b[200] = m;
    c[17] = c[200] = m;  // same tie: top-1 agrees (first index)
  }
  if (r % 11 == 2) std::reverse(c.begin(), c.end());  // a real disagreement
}

struct naive_row {
  double kld, p_top, q_top;
  double scale;  // sum p (|log p| + |log q|): the size the KL's rounding errors scale with
  std::int64_t top_b, top_c;
  double overlap;
};

// The textbook formulas, with no compensation.
naive_row naive(const std::vector<double>& b, const std::vector<double>& c, int k) {
  auto logp = [](const std::vector<double>& x) {
    const double m = *std::max_element(x.begin(), x.end());
    double s = 0;
    for (double v : x) s += std::exp(v - m);
    std::vector<double> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] - m - std::log(s);
    return out;
  };
  const auto lp = logp(b), lq = logp(c);
  naive_row r{};
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double p = std::exp(lp[i]);
    if (p > 0) r.kld += p * (lp[i] - lq[i]);
    if (p > 0) r.scale += p * (std::fabs(lp[i]) + std::fabs(lq[i]));
  }
  r.top_b = std::max_element(b.begin(), b.end()) - b.begin();
  r.top_c = std::max_element(c.begin(), c.end()) - c.begin();
  r.p_top = std::exp(lp[r.top_b]);
  r.q_top = std::exp(lq[r.top_b]);
  auto topk = [&](const std::vector<double>& x) {
    std::vector<std::int64_t> idx(x.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](auto a, auto bb) { return x[a] > x[bb]; });
    idx.resize(k);
    std::sort(idx.begin(), idx.end());
    return idx;
  };
  const auto ta = topk(b), tb = topk(c);
  std::vector<std::int64_t> both;
  std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(both));
  r.overlap = static_cast<double>(both.size()) / k;
  return r;
}

double nearest_rank(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  auto k = static_cast<std::int64_t>(std::ceil(q * static_cast<double>(v.size())));
  k = std::clamp<std::int64_t>(k, 1, static_cast<std::int64_t>(v.size()));
  return v[k - 1];
}

// llama.cpp's percentile (perplexity.cpp, kl_divergence()): h = q (n - 1), the linear
// interpolation between the order statistics floor(h) and floor(h) + 1.
double interpolated(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double h = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(h);
  const double f = h - static_cast<double>(i);
  return (1 - f) * v[i] + f * v[std::min(i + 1, v.size() - 1)];
}

// Rounding bound for one row's KL: the naive reference sums k_v terms plainly (error <= k_v u
// times the sum of |terms|, and each log p carries u |log p|); compare_row's compensated sums
// add ~19u and its exp < 1 ulp. (k_v + 64) u * scale covers both with margin.
double kl_tol(const naive_row& y) {
  return (k_v + 64) * 0x1p-53 * (y.scale + 1.0);
}

TEST(kl_metrics, rows_and_summary_match_the_naive_formulas) {
  const std::int64_t n = 1000;
  const int k = 10;
  kl_scratch s;
  std::vector<kl_row> rows;
  std::vector<naive_row> ref;
  std::vector<double> b, c;
  double row_tol = 0;  // the largest per-row KL bound: percentiles of values each within it
  for (std::int64_t r = 0; r < n; ++r) {
    make_rows(42, r, b, c);
    rows.push_back(compare_row(b, c, k, -1, s));
    ref.push_back(naive(b, c, k));
    const auto& x = rows.back();
    const auto& y = ref.back();
    ASSERT_NEAR(x.kld, y.kld, kl_tol(y)) << "row " << r;
    row_tol = std::max(row_tol, kl_tol(y));
    ASSERT_EQ(x.top_base, y.top_b) << "row " << r;
    ASSERT_EQ(x.top_cand, y.top_c) << "row " << r;
    // p = exp(log p): relative error (|log p| + k_v) u at most on both sides.
    ASSERT_NEAR(x.p_base_top, y.p_top, (k_v + 64) * 0x1p-53 * (1.0 + y.scale)) << "row " << r;
    ASSERT_NEAR(x.q_base_top, y.q_top, (k_v + 64) * 0x1p-53 * (1.0 + y.scale)) << "row " << r;
    ASSERT_DOUBLE_EQ(x.topk_overlap, y.overlap) << "row " << r;
    if (r % 5 == 1 && r % 11 != 2) {
      EXPECT_EQ(x.top_base, 17) << "a tie goes to the first index";
      EXPECT_EQ(x.top_cand, 17);
    }
  }
  const auto sum = summarize(rows, k_v, k, false, 5);
  std::vector<double> kl(n), dp(n);
  double mean = 0, same = 0, sq = 0, dmean = 0, ov = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    kl[r] = ref[r].kld;
    dp[r] = ref[r].q_top - ref[r].p_top;
    mean += kl[r] / n;
    dmean += dp[r] / n;
    sq += dp[r] * dp[r] / n;
    same += ref[r].top_b == ref[r].top_c ? 1 : 0;
    ov += ref[r].overlap / n;
  }
  double var = 0;
  for (double x : kl) var += (x - mean) * (x - mean);
  const double se = std::sqrt(var / (n * (n - 1.0)));
  // Order statistics move by at most the per-row bound; the mean adds n u of its own sum.
  const double tol = row_tol + n * 0x1p-53 * std::max(1.0, mean);
  EXPECT_NEAR(sum.kld.mean, mean, tol);
  EXPECT_NEAR(sum.kld.stderr_, se, 1e-9 * std::max(1.0, se));
  // Issue 29 item 6: kld.median ... p999 are llama.cpp's interpolated percentiles (an
  // interpolation of two values each within row_tol is within row_tol); the nearest-rank ones
  // they were before stay in kld_nearest_rank.
  EXPECT_NEAR(sum.kld.median, interpolated(kl, 0.5), tol);
  EXPECT_NEAR(sum.kld.p90, interpolated(kl, 0.9), tol);
  EXPECT_NEAR(sum.kld.p99, interpolated(kl, 0.99), tol);
  EXPECT_NEAR(sum.kld.p999, interpolated(kl, 0.999), tol);
  EXPECT_NEAR(sum.kld_nearest_rank.median, nearest_rank(kl, 0.5), tol);
  EXPECT_NEAR(sum.kld_nearest_rank.p90, nearest_rank(kl, 0.9), tol);
  EXPECT_NEAR(sum.kld_nearest_rank.p99, nearest_rank(kl, 0.99), tol);
  EXPECT_NEAR(sum.kld_nearest_rank.p999, nearest_rank(kl, 0.999), tol);
  EXPECT_NEAR(sum.kld.max, *std::max_element(kl.begin(), kl.end()), row_tol);
  EXPECT_DOUBLE_EQ(sum.top1_agreement, same / n);
  EXPECT_NEAR(sum.top1_stderr, std::sqrt((same / n) * (1 - same / n) / (n - 1.0)), 1e-15);
  EXPECT_NEAR(sum.delta_p.mean, dmean, 1e-10);
  EXPECT_NEAR(sum.delta_p.rms, std::sqrt(sq), 1e-10);
  EXPECT_NEAR(sum.delta_p.p01, interpolated(dp, 0.01), 1e-10);
  EXPECT_NEAR(sum.delta_p.median, interpolated(dp, 0.5), 1e-10);
  EXPECT_NEAR(sum.delta_p.p99, interpolated(dp, 0.99), 1e-10);
  EXPECT_NEAR(sum.topk_overlap, ov, 1e-12);
  // The data has disagreements (reversed rows) and agreements; neither extreme.
  EXPECT_GT(same, 0.5 * n);
  EXPECT_LT(same, n);
  // Worst positions: the largest KLs, in order.
  ASSERT_EQ(sum.worst.size(), 5u);
  std::vector<double> sorted = kl;
  std::sort(sorted.rbegin(), sorted.rend());
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NEAR(sum.worst[i].kld, sorted[i], row_tol);
}

TEST(kl_metrics, identical_rows_have_zero_kl_and_full_agreement) {
  kl_scratch s;
  std::vector<double> b, c;
  make_rows(3, 3, b, c);  // a +-1e4 row
  const auto r = compare_row(b, b, 5, -1, s);
  EXPECT_EQ(r.kld, 0.0);
  EXPECT_EQ(r.top_base, r.top_cand);
  EXPECT_EQ(r.topk_overlap, 1.0);
  EXPECT_EQ(r.q_base_top, r.p_base_top);
}

TEST(kl_metrics, log_probs_and_logits_give_the_same_kl) {
  kl_scratch s;
  std::vector<double> b, c;
  make_rows(5, 0, b, c);
  std::vector<double> lb(b.size()), lc(c.size());
  numprobe::metrics::log_softmax(b, lb);
  numprobe::metrics::log_softmax(c, lc);
  const auto a = compare_row(b, c, 10, 7, s);
  const auto x = compare_row(lb, lc, 10, 7, s);
  EXPECT_NEAR(a.kld, x.kld, 1e-14);
  EXPECT_NEAR(a.nll_base, -lb[7], 1e-12);
  EXPECT_NEAR(x.nll_cand, -lc[7], 1e-12);
}

TEST(kl_metrics, extreme_spread_row_is_one_hot) {
  // +-1e4 around a clear top: the softmax is exactly one-hot in double, and a candidate that
  // moved the top to another token has KL equal to the logit gap.
  std::vector<double> b(50, -1e4), c(50, -1e4);
  b[3] = 1e4;
  c[3] = 0.0;
  c[9] = 100.0;
  kl_scratch s;
  const auto r = compare_row(b, c, 1, -1, s);
  EXPECT_EQ(r.p_base_top, 1.0);
  EXPECT_NEAR(r.kld, 100.0, 1e-12);  // log p(3) - log q(3) = 0 - (0 - 100)
  EXPECT_EQ(r.top_cand, 9);
  EXPECT_EQ(r.topk_overlap, 0.0);
}

TEST(kl_metrics, percentile_is_nearest_rank) {
  std::vector<double> v{5, 1, 4, 2, 3};
  EXPECT_EQ(numprobe::metrics::percentile(v, 0.5), 3);
  std::vector<double> w{4, 1, 3, 2};
  EXPECT_EQ(numprobe::metrics::percentile(w, 0.5), 2);  // lower middle
  EXPECT_EQ(numprobe::metrics::percentile(w, 0.99), 4);
  EXPECT_EQ(numprobe::metrics::percentile(w, 0.0), 1);
}

}  // namespace

namespace {

// Rows long enough to cross compare_row's vector chunks (32 floats, 16 doubles), its summing
// blocks (128 terms) and a ragged tail, with f32-range extremes.
void make_f32_rows(std::int64_t r, std::size_t v, std::vector<float>& b, std::vector<float>& c) {
  b.resize(v);
  c.resize(v);
  const double spread = r % 4 == 0 ? 3e37 : r % 4 == 1 ? 1e4 : 3.0;
  for (std::size_t i = 0; i < v; ++i) {
    b[i] = static_cast<float>(spread * numprobe::normal_at(77, 1, r * 100000 + i));
    c[i] = static_cast<float>(b[i] + 0.2 * numprobe::normal_at(77, 2, r * 100000 + i));
  }
  if (r % 3 == 0) c[v - 1] = b[v / 2] = 3.0e38f;  // top-1 at the tail / middle
  if (r % 5 == 2) b[5] = b[v - 2] = c[5] = c[v - 2] = 3.3e38f;  // a tie in each row
}

}  // namespace

TEST(kl_metrics, f32_rows_in_place_equal_the_widened_rows_and_the_naive_kl) {
  kl_scratch s1, s2;
  std::vector<float> bf, cf;
  for (std::int64_t r = 0; r < 40; ++r) {
    const std::size_t v = 1 + static_cast<std::size_t>(r * 977 % 4099);  // 1 ... 4099, ragged
    make_f32_rows(r, v, bf, cf);
    const std::vector<double> bd(bf.begin(), bf.end()), cd(cf.begin(), cf.end());
    kl_row a, d;
    ASSERT_TRUE(numprobe::metrics::compare_row_checked(std::span<const float>(bf),
                                                       std::span<const float>(cf), 7,
                                                       static_cast<std::int64_t>(v / 3), s1, a));
    ASSERT_TRUE(numprobe::metrics::compare_row_checked(std::span<const double>(bd),
                                                       std::span<const double>(cd), 7,
                                                       static_cast<std::int64_t>(v / 3), s2, d));
    // Exactly the same arithmetic on the same values: bit-identical.
    EXPECT_EQ(std::memcmp(&a.kld, &d.kld, 8), 0) << "row " << r;
    EXPECT_EQ(a.top_base, d.top_base);
    EXPECT_EQ(a.top_cand, d.top_cand);
    EXPECT_EQ(a.p_base_top, d.p_base_top);
    EXPECT_EQ(a.q_base_top, d.q_base_top);
    EXPECT_EQ(a.topk_overlap, d.topk_overlap);
    EXPECT_EQ(a.nll_base, d.nll_base);
    EXPECT_EQ(a.nll_cand, d.nll_cand);
    const auto y = naive(bd, cd, static_cast<int>(std::min<std::size_t>(7, v)));
    // The naive sums have v terms here: v u instead of k_v u.
    const double tol = (static_cast<double>(v) + 64) * 0x1p-53 * (y.scale + 1.0);
    EXPECT_NEAR(a.kld, y.kld, tol) << "row " << r << " v " << v;
    EXPECT_EQ(a.top_base, y.top_b) << "row " << r;
    EXPECT_EQ(a.top_cand, y.top_c) << "row " << r;
    EXPECT_EQ(a.topk_overlap, y.overlap) << "row " << r;
  }
}

TEST(kl_metrics, non_finite_rows_are_reported_not_compared) {
  kl_scratch s;
  std::vector<float> bf, cf;
  make_f32_rows(2, 1000, bf, cf);
  for (std::size_t pos : {0u, 17u, 500u, 999u}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      auto c = cf;
      c[pos] = bad;
      kl_row r;
      EXPECT_FALSE(numprobe::metrics::compare_row_checked(std::span<const float>(bf),
                                                          std::span<const float>(c), 5, -1, s, r))
          << "pos " << pos;
      EXPECT_TRUE(std::isnan(r.kld));
    }
  }
}
