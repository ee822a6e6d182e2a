// How compare_attention counts a non-finite LSE, and how the attention point classifies the
// offending rows, on hand-built outputs whose findings are known exactly. The rule (NUMERICS.md):
// a fully masked row is O = 0, LSE = -inf and is no finding; NaN anywhere, +inf anywhere and
// -inf on a row that sees a key are findings.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "numprobe/metrics/attention_errors.hpp"
#include "probes/point/attention_probe.hpp"

using namespace numprobe;

namespace {

constexpr double k_inf = std::numeric_limits<double>::infinity();
constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// Two rows of one head, D = 2: row 0 is fully masked (reference LSE -inf), row 1 sees keys.
attention_output reference_pair() {
  attention_output r;
  r.rows = {0, 1};
  r.heads = 1;
  r.head_dim = 2;
  r.o = {0.0, 0.0, 0.25, -0.5};
  r.lse = {-k_inf, 1.5};
  return r;
}

metrics::attention_errors compare_lse(double lse0, double lse1, bool known = true) {
  auto c = reference_pair();
  c.lse = {lse0, lse1};
  c.lse_known = known;
  return metrics::compare_attention(c, reference_pair(), formats::format_id::m_f32);
}

}  // namespace

TEST(attention_nonfinite, minus_inf_on_a_fully_masked_row_is_the_definition_not_a_finding) {
  const auto e = compare_lse(-k_inf, 1.5);
  EXPECT_EQ(e.nonfinite_total(), 0);
  EXPECT_EQ(e.lse_max_abs, 0.0);
}

TEST(attention_nonfinite, minus_inf_on_a_row_with_keys_is_a_finding) {
  const auto e = compare_lse(-k_inf, -k_inf);
  EXPECT_EQ(e.lse_inf_count, 1);
  EXPECT_EQ(e.lse_nan_count, 0);
  EXPECT_TRUE(e.per_row[1].lse_inf);
  EXPECT_FALSE(e.per_row[0].lse_inf);
  EXPECT_EQ(e.nan_count + e.inf_count, 0);  // O is clean: the finding is the LSE's alone
}

TEST(attention_nonfinite, plus_inf_is_a_finding_on_every_row) {
  const auto e = compare_lse(k_inf, k_inf);
  EXPECT_EQ(e.lse_inf_count, 2);
  EXPECT_EQ(e.nonfinite_total(), 2);
}

TEST(attention_nonfinite, nan_lse_is_a_finding_only_when_the_lse_is_given) {
  EXPECT_EQ(compare_lse(k_nan, k_nan).lse_nan_count, 2);
  // No LSE at all (exec without lse.npy): the NaN poison is "unknown", not a finding, and
  // lse_max_abs reads inf as examples/exec/README.md documents.
  const auto e = compare_lse(k_nan, k_nan, false);
  EXPECT_EQ(e.nonfinite_total(), 0);
  EXPECT_FALSE(e.lse_known);
  EXPECT_TRUE(std::isinf(e.lse_max_abs));
}

TEST(attention_nonfinite, a_finite_lse_on_a_fully_masked_row_is_a_mismatch_not_a_nonfinite) {
  const auto e = compare_lse(0.0, 1.5);
  EXPECT_EQ(e.nonfinite_total(), 0);
  EXPECT_EQ(e.lse_mismatch_inf, 1);
}

TEST(attention_nonfinite, o_counts_per_row_head_sum_to_the_totals) {
  auto c = reference_pair();
  c.o = {k_nan, k_nan, k_inf, 0.0};
  const auto e = metrics::compare_attention(c, reference_pair(), formats::format_id::m_f32);
  EXPECT_EQ(e.nan_count, 2);
  EXPECT_EQ(e.inf_count, 1);
  EXPECT_EQ(e.per_row[0].o_nan, 2);
  EXPECT_EQ(e.per_row[1].o_inf, 1);
  EXPECT_EQ(e.nonfinite_total(), 3);
}

TEST(attention_nonfinite, rows_are_classified_by_their_visible_keys) {
  attention_case c;
  c.seq = 100;
  c.queries = 130;  // bottom-right causal: rows 0..29 see no key
  c.heads = 1;
  c.kv_heads = 1;
  c.head_dim = 16;
  c.mask = mask_kind::m_causal;
  EXPECT_EQ(probes::classify_row(c, 29), probes::nonfinite_row_kind::m_fully_masked);
  EXPECT_EQ(probes::classify_row(c, 30), probes::nonfinite_row_kind::m_ordinary);  // key 0 only
  c.queries = 0;
  c.mask = mask_kind::m_window;
  c.window = 10;  // row t sees (t - 10, t]: from t = 10 on the window's edge cuts key 0 off
  EXPECT_EQ(probes::classify_row(c, 9), probes::nonfinite_row_kind::m_ordinary);
  EXPECT_EQ(probes::classify_row(c, 10), probes::nonfinite_row_kind::m_window_edge);
  c.mask = mask_kind::m_causal_top_left;
  c.queries = 130;  // top-left: every row sees key 0
  EXPECT_EQ(probes::classify_row(c, 0), probes::nonfinite_row_kind::m_ordinary);
}

TEST(attention_nonfinite, the_report_counts_each_row_once_and_lists_the_first_pairs) {
  attention_case c;
  c.seq = 4;
  c.queries = 6;  // rows 0, 1 fully masked; rows 2..5 see keys from 0
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 1;
  c.mask = mask_kind::m_causal;
  metrics::attention_errors e;
  auto add = [&](std::int64_t row, std::int64_t head, std::int64_t nan, bool lse_inf) {
    metrics::row_head_error rh;
    rh.row = row;
    rh.head = head;
    rh.o_nan = nan;
    rh.lse_inf = lse_inf;
    rh.lse = lse_inf ? k_inf : 0.0;
    e.per_row.push_back(rh);
    e.nan_count += nan;
    e.lse_inf_count += lse_inf ? 1 : 0;
  };
  for (std::int64_t r = 0; r < 6; ++r)
    for (std::int64_t h = 0; h < 2; ++h) add(r, h, r < 2 ? 1 : 0, r == 4 && h == 1);
  const auto rep = probes::make_nonfinite_report(e, c);
  EXPECT_EQ(rep.nan, 4);
  EXPECT_EQ(rep.lse_inf, 1);
  EXPECT_EQ(rep.rows_fully_masked, 2);  // rows 0 and 1, each counted once for its two heads
  EXPECT_EQ(rep.rows_ordinary, 1);      // row 4
  EXPECT_EQ(rep.rows_window_edge, 0);
  ASSERT_EQ(rep.first.size(), 5u);
  EXPECT_EQ(rep.first[4].row, 4);
  EXPECT_EQ(rep.first[4].head, 1);
  EXPECT_TRUE(rep.first[4].lse_finding);
  EXPECT_EQ(rep.summary(),
            "4 NaN in O, 1 Inf in LSE (rows: 2 fully masked, 0 window edge, 1 ordinary), first at "
            "row 0 head 0 (batch 0, query 0, keys [0, 0), fully-masked)");
}
