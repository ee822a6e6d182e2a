// The double softmax reference against the same template in cpp_bin_float_50: relative error
// <= 1e-12 (DESIGN.md), and the masked-row semantics (LSE = -inf, never NaN).
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>

#include "reference/softmax_impl.hpp"

namespace numprobe::test {
namespace {

using mp50 = boost::multiprecision::cpp_bin_float_50;

// Basis: the 1e-12 relative bound for the double reference. A logit of magnitude L is
// held to L * u absolute in double (u = 2^-53) once temperature or softcap transform it, so
// shifted rows get max(1e-12, 4 L u).
double bound_for(const softmax_case& c) {
  double l = 30.0;
  if (c.dist == input_dist::m_shifted) l = std::fabs(c.logit_shift) + 30.0;
  return std::max(1e-12, 4.0 * l / c.temperature * 0x1.0p-53);
}

struct err {
  double p = 0, logp = 0, lse = 0, ce = 0;
};

// Relative on p (where p is a normal double), and relative-or-absolute (|x| >= 1 relative,
// else absolute) on log p, LSE and cross-entropy, whose values cross zero.
err max_error(const softmax_output& a, const softmax_output& exact) {
  err e;
  auto rel_abs = [](double x, double r) {
    if (x == r) return 0.0;  // both -inf included
    if (!std::isfinite(x) || !std::isfinite(r)) return HUGE_VAL;
    return std::fabs(x - r) / std::max(1.0, std::fabs(r));
  };
  for (std::size_t i = 0; i < exact.p.size(); ++i) {
    if (exact.p[i] >= 1e-280) e.p = std::max(e.p, std::fabs(a.p[i] - exact.p[i]) / exact.p[i]);
    else e.p = std::max(e.p, std::fabs(a.p[i] - exact.p[i]) > 1e-290 ? INFINITY : 0.0);
    e.logp = std::max(e.logp, rel_abs(a.logp[i], exact.logp[i]));
  }
  for (std::size_t r = 0; r < exact.lse.size(); ++r) {
    e.lse = std::max(e.lse, rel_abs(a.lse[r], exact.lse[r]));
    e.ce = std::max(e.ce, rel_abs(a.ce[r], exact.ce[r]));
  }
  return e;
}

softmax_case make(std::int64_t v, std::int64_t rows, input_dist d, softmax_mask m = softmax_mask::m_none,
                  double temp = 1.0, double cap = 0.0, formats::format_id in = formats::format_id::m_bf16) {
  softmax_case c;
  c.vocab = v;
  c.rows = rows;
  c.dist = d;
  c.mask = m;
  c.temperature = temp;
  c.softcap = cap;
  c.dtype = in;
  c.seed = 11;
  return c;
}

std::vector<softmax_case> cases() {
  using d = input_dist;
  using m = softmax_mask;
  return {make(4099, 3, d::m_normal),
          make(4099, 2, d::m_llm, m::m_padding, 0.7, 30.0),
          make(3001, 2, d::m_shifted, m::m_banned, 1.0, 0.0, formats::format_id::m_f32),
          make(2048, 2, d::m_rescale_stress, m::m_prefix, 1.3),
          make(1500, 2, d::m_diffuse, m::m_all),
          make(65537, 1, d::m_max_first, m::m_none, 1.0, 0.0, formats::format_id::m_f32)};
}

class softmax_vs_multiprecision : public ::testing::TestWithParam<softmax_case> {};

TEST_P(softmax_vs_multiprecision, relative_error_below_1e_12) {
  const softmax_case& c = GetParam();
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows));
  std::iota(rows.begin(), rows.end(), 0);
  const auto x = softmax_logits(c, rows, true);
  const softmax_output exact = reference::softmax_generic<mp50>(c, x, rows);
  const softmax_output fast = reference::softmax(c, x, rows);
  const err e = max_error(fast, exact);
  const double b = bound_for(c);
  EXPECT_LE(e.p, b) << c.id();
  EXPECT_LE(e.logp, b) << c.id();
  EXPECT_LE(e.lse, b) << c.id();
  EXPECT_LE(e.ce, b) << c.id();
  for (double v : fast.p) ASSERT_FALSE(std::isnan(v));
  for (double v : fast.lse) ASSERT_FALSE(std::isnan(v));
}

INSTANTIATE_TEST_SUITE_P(cases, softmax_vs_multiprecision, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string s = info.param.id();
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
});

TEST(softmax_reference, fully_masked_row_is_lse_minus_inf_and_zero_probabilities) {
  softmax_case c = make(300, 2, input_dist::m_normal, softmax_mask::m_all);
  const std::vector<std::int64_t> rows{0, 1};
  const auto out = reference::softmax(c, softmax_logits(c, rows, true), rows);
  for (double l : out.lse) EXPECT_EQ(l, -INFINITY);
  for (double p : out.p) EXPECT_EQ(p, 0.0);
  for (double lp : out.logp) EXPECT_EQ(lp, -INFINITY);
  for (double ce : out.ce) EXPECT_EQ(ce, 0.0);
  EXPECT_EQ(softmax_target(c, 0), -1);
}

TEST(softmax_reference, masks_zero_their_entries_and_probabilities_sum_to_one) {
  for (auto m : {softmax_mask::m_padding, softmax_mask::m_banned, softmax_mask::m_prefix}) {
    softmax_case c = make(5000, 1, input_dist::m_normal, m);
    const std::vector<std::int64_t> rows{0};
    const auto out = reference::softmax(c, softmax_logits(c, rows, true), rows);
    double sum = 0;
    std::int64_t masked = 0;
    for (std::int64_t i = 0; i < c.vocab; ++i) {
      sum += out.p[static_cast<std::size_t>(i)];
      if (softmax_masked(c, 0, i)) {
        ++masked;
        EXPECT_EQ(out.p[static_cast<std::size_t>(i)], 0.0);
      }
    }
    EXPECT_GT(masked, 0) << c.id();
    EXPECT_NEAR(sum, 1.0, 1e-12) << c.id();
    EXPECT_FALSE(softmax_masked(c, 0, softmax_target(c, 0))) << c.id();
  }
}

TEST(softmax_reference, case_id_round_trips) {
  softmax_case c = make(1234, 3, input_dist::m_shifted, softmax_mask::m_padding, 0.5, 20.0);
  c.masked = 17;
  EXPECT_EQ(parse_softmax_case(c.id()).id(), c.id());
  EXPECT_THROW((void)parse_softmax_case("softmax(V=0,R=1,in=bf16,mask=none,seed=1)"), error);
  EXPECT_THROW((void)parse_softmax_mask("nope"), error);
}

}  // namespace
}  // namespace numprobe::test
