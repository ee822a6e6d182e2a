// The reference against an independent brute force (element-wise mask predicate from
// NUMERICS.md, long double), plus the properties that single out the classic bug classes:
// the GQA mapping, fully masked rows, mask geometry, and argument checking.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "numprobe/base/error.hpp"
#include "numprobe/reference/attention.hpp"
#include "reference/reference_cases.hpp"
#include "reference/reference_test_support.hpp"

namespace numprobe::test {
namespace {

// The brute force carries 11 more significand bits than double, so the difference is the
// double reference's own error: held to the same 1e-12 bound the multiprecision test proves.
// dist=shifted is excluded from this list's bound for the reason given in that test.
constexpr double k_brute_bound = 1e-12;

class reference_vs_brute_force : public ::testing::TestWithParam<attention_case> {};

TEST_P(reference_vs_brute_force, every_row_matches) {
  const attention_case& c = GetParam();
  const case_data d = make_case_data(c);  // every row
  const attention_output want = brute_force_attention(d);
  const attention_output got = reference::attention(c, d.q, d.rows, d.k, d.v);
  const row_error e = max_row_error(got, want);
  const double bound = c.dist == input_dist::m_shifted
                           ? static_cast<double>(c.head_dim) * std::fabs(c.logit_shift) * 0x1.0p-53
                           : k_brute_bound;
  EXPECT_LE(e.o, bound) << c.id();
  EXPECT_LE(e.lse, bound) << c.id();
}

INSTANTIATE_TEST_SUITE_P(cases, reference_vs_brute_force, ::testing::ValuesIn(reference_cases()),
                         [](const auto& info) { return gtest_name(info.param.id()); });

// visible_keys against the element-wise predicate, key by key, for every mask and both
// alignments, with T < S, T = S and T > S, and windows W-1, W, W+1 around a 64-key tile.
TEST(visible_keys, matches_the_mask_predicate_key_by_key) {
  for (const mask_kind mask : {mask_kind::m_none, mask_kind::m_causal, mask_kind::m_causal_top_left,
                               mask_kind::m_window, mask_kind::m_ranges})
    for (const auto& [t_len, s_len] : {std::pair{3, 128}, {65, 65}, {129, 64}, {1, 1}, {64, 300}})
      for (const std::int64_t w : {63, 64, 65}) {
        attention_case c = make_case(t_len, s_len, 1, 1, 8, mask);
        c.window = w;
        if (mask == mask_kind::m_ranges) fill_random_ranges(c);
        for (std::int64_t t = 0; t < c.t(); ++t) {
          const key_range r = reference::visible_keys(c, t);
          for (std::int64_t j = 0; j < c.seq; ++j)
            ASSERT_EQ(j >= r.begin && j < r.end, key_visible(c, t, j))
                << c.id() << " W=" << w << " t=" << t << " j=" << j;
        }
      }
}

// dist=constant-v gives KV head g the value 1 + g + d / (2D) at every key, so O of query head h
// must be exactly head h / (Hq / Hkv)'s constants whatever the weights are. The tolerance is
// 1e-15 relative (~9 unit roundoffs): the only error is the rounding of sum(p v) / sum(p);
// a wrong mapping such as h % Hkv is off by at least 1 / (1 + Hkv), i.e. >= 10%.
TEST(reference_gqa, constant_v_per_kv_head_selects_head_h_over_group) {
  for (const auto& [hq, hkv] : {std::pair{8, 2}, {8, 8}, {7, 1}, {12, 3}}) {
    attention_case c = make_case(70, 129, hq, hkv, 32, mask_kind::m_causal);
    c.dist = input_dist::m_constant_v;
    c.batch = 2;
    const case_data d = make_case_data(c);
    for (const bool fast : {true, false}) {
      const attention_output o = fast ? reference::attention(c, d.q, d.rows, d.k, d.v)
                                      : reference::attention_generic<double>(c, d.q, d.rows, d.k, d.v);
      double worst = 0;
      for (std::size_t i = 0; i < d.rows.size(); ++i)
        for (std::int64_t h = 0; h < hq; ++h) {
          const std::int64_t g = h / (hq / hkv);
          for (std::int64_t e = 0; e < c.head_dim; ++e) {
            const double want = 1.0 + static_cast<double>(g) + static_cast<double>(e) / (2.0 * c.head_dim);
            worst = std::max(worst, std::fabs(o.o_at(i, h, e) - want) / want);
          }
        }
      EXPECT_LE(worst, 1e-15) << c.id() << (fast ? " attention" : " attention_generic<double>");
    }
  }
}

// Causal with T > S: rows t < T - S see no key. They are defined as O = 0 and LSE = -inf;
// every other row must be finite. Outputs arrive NaN-poisoned, so a row left unwritten fails.
TEST(reference_masked_rows, fully_masked_rows_are_zero_with_minus_inf_lse) {
  attention_case c = make_case(100, 37, 4, 2, 16, mask_kind::m_causal);
  c.batch = 2;
  const case_data d = make_case_data(c);
  using fn = attention_output (*)(const attention_case&, std::span<const double>,
                                  std::span<const std::int64_t>, std::span<const double>,
                                  std::span<const double>);
  for (const fn f : {fn{&reference::attention}, fn{&reference::attention_generic<double>},
                     fn{&reference::attention_naive}}) {
    const attention_output o = f(c, d.q, d.rows, d.k, d.v);
    std::int64_t masked = 0;
    for (std::size_t i = 0; i < d.rows.size(); ++i) {
      const bool empty = d.rows[i] % c.t() < c.t() - c.seq;
      for (std::int64_t h = 0; h < c.heads; ++h) {
        const double lse = o.lse[i * c.heads + h];
        if (empty) {
          ++masked;
          EXPECT_EQ(lse, -std::numeric_limits<double>::infinity()) << "row " << d.rows[i];
        } else {
          EXPECT_TRUE(std::isfinite(lse)) << "row " << d.rows[i];
        }
        for (std::int64_t e = 0; e < c.head_dim; ++e) {
          if (empty) EXPECT_EQ(o.o_at(i, h, e), 0.0) << "row " << d.rows[i];
          else EXPECT_TRUE(std::isfinite(o.o_at(i, h, e))) << "row " << d.rows[i];
        }
      }
    }
    EXPECT_EQ(masked, c.batch * (c.t() - c.seq) * c.heads);
  }
}

// Rows may come in any order and repeat: each output row must be that row's result.
TEST(reference_rows, unsorted_and_repeated_rows_match_the_full_run) {
  attention_case c = make_case(130, 130, 4, 1, 16, mask_kind::m_causal);
  c.batch = 2;
  const case_data all = make_case_data(c);
  const attention_output full = reference::attention(c, all.q, all.rows, all.k, all.v);
  const case_data some = make_case_data(c, {259, 3, 130, 3, 64, 0, 129});
  const attention_output part = reference::attention(c, some.q, some.rows, some.k, some.v);
  ASSERT_EQ(part.rows, some.rows);
  for (std::size_t i = 0; i < some.rows.size(); ++i)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      // Blocks group different rows in the two runs, so GEMM blocking may differ: within the
      // reference's own 1e-12 relative bound.
      const auto r = static_cast<std::size_t>(some.rows[i]);
      EXPECT_NEAR(part.lse[i * c.heads + h], full.lse[r * c.heads + h], 1e-12 * std::fabs(full.lse[r * c.heads + h]) + 1e-12);
      for (std::int64_t e = 0; e < c.head_dim; ++e)
        EXPECT_NEAR(part.o_at(i, h, e), full.o_at(r, h, e), 1e-12);
    }
}

// Inconsistent arguments are input errors (exit 2) naming the argument, never a crash.
TEST(reference_arguments, bad_sizes_and_rows_are_input_errors) {
  const attention_case c = make_case(8, 8, 2, 1, 4, mask_kind::m_none);
  const case_data d = make_case_data(c);
  auto expect_input_error = [](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const numprobe::error& e) {
      EXPECT_EQ(e.code(), exit_code::m_input);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::vector<double> short_k(d.k.begin(), d.k.end() - 1);
  expect_input_error([&] { (void)reference::attention(c, d.q, d.rows, short_k, d.v); }, ": k");
  expect_input_error([&] { (void)reference::attention_naive(c, d.q, d.rows, d.k, short_k); }, ": v");
  const std::vector<std::int64_t> bad_rows{0, 8};
  const std::vector<double> q2(d.q.begin(), d.q.begin() + 2 * c.heads * c.head_dim);
  expect_input_error([&] { (void)reference::attention_generic<double>(c, q2, bad_rows, d.k, d.v); }, "rows");
  expect_input_error([&] { (void)reference::attention(c, q2, d.rows, d.k, d.v); }, "q_rows");
}

}  // namespace
}  // namespace numprobe::test
