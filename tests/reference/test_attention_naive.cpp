// The same-precision naive baseline: its error against the reference is the yardstick of
// ratio = err(kernel) / err(naive), so it must be nonzero and of the size the dtype implies.
#include <gtest/gtest.h>

#include <cmath>

#include "numprobe/formats/format.hpp"
#include "numprobe/reference/attention.hpp"
#include "reference/reference_cases.hpp"
#include "reference/reference_test_support.hpp"

namespace numprobe::test {
namespace {

// Global relative RMS error ||o - o_ref||_F / ||o_ref||_F over every visible row.
double relative_rms(const attention_output& got, const attention_output& want) {
  double diff2 = 0, norm2 = 0;
  for (std::size_t i = 0; i < want.o.size(); ++i) {
    diff2 += (got.o[i] - want.o[i]) * (got.o[i] - want.o[i]);
    norm2 += want.o[i] * want.o[i];
  }
  return std::sqrt(diff2 / norm2);
}

struct naive_case {
  attention_case c;
  double multiple;  // bound = multiple * unit roundoff of the dtype
};

// Basis of the bound: the baseline rounds three times to the dtype (S, P, O), each a relative
// error <= u = 2^-8 in bf16. Rounding O contributes ~u/sqrt(3) RMS; rounding P perturbs each
// weight by <= u, which moves O by about u * sqrt(sum p^2) relative; rounding a logit of size
// |s| (a few units for N(0,1) data at scale 1/sqrt(D)) moves its weight by |s| u. Summed, the
// RMS stays within about 2u; 4u leaves a 2x margin. fp32 accumulation (2^-24) is negligible.
// The error must also be > 0.1 u: a baseline that returned the reference itself would pass
// any upper bound, and with three roundings an RMS below u / 10 is not possible.
class naive_baseline : public ::testing::TestWithParam<naive_case> {};

TEST_P(naive_baseline, relative_rms_error_is_a_small_multiple_of_unit_roundoff) {
  const attention_case& c = GetParam().c;
  const case_data d = make_case_data(c);
  const attention_output ref = reference::attention(c, d.q, d.rows, d.k, d.v);
  const attention_output naive = reference::attention_naive(c, d.q, d.rows, d.k, d.v);
  for (const double x : naive.o) ASSERT_TRUE(std::isfinite(x)) << c.id();
  for (std::size_t i = 0; i < naive.lse.size(); ++i)
    ASSERT_EQ(std::isinf(naive.lse[i]), std::isinf(ref.lse[i])) << c.id() << " lse " << i;
  // Every output is a dtype value: the final rounding really happened.
  for (const double x : naive.o) ASSERT_EQ(formats::round_to(c.dtype, x), x) << c.id();
  const double u = formats::unit_roundoff(c.dtype);
  const double err = relative_rms(naive, ref);
  RecordProperty("rel_rms_over_u", std::to_string(err / u));
  EXPECT_GT(err, 0.1 * u) << c.id();
  EXPECT_LT(err, GetParam().multiple * u) << c.id();
  // LSE in fp32 from dtype logits: error ~ |logit| * u absolute; a few units for these inputs.
  for (std::size_t i = 0; i < naive.lse.size(); ++i) {
    if (std::isfinite(ref.lse[i])) {
      EXPECT_NEAR(naive.lse[i], ref.lse[i], 8 * u * std::max(1.0, std::fabs(ref.lse[i])));
    }
  }
}

std::vector<naive_case> naive_cases() {
  std::vector<naive_case> out;
  auto add = [&](attention_case c) {
    c.dtype = formats::format_id::m_bf16;
    out.push_back({c, 4.0});
    c.dtype = formats::format_id::m_f16;
    out.push_back({c, 4.0});
  };
  add(make_case(65, 129, 8, 2, 64, mask_kind::m_causal));
  add(make_case(300, 300, 4, 4, 128, mask_kind::m_none));
  {
    attention_case c = make_case(130, 65, 4, 1, 32, mask_kind::m_causal);  // fully masked rows
    c.batch = 2;
    add(c);
  }
  {
    attention_case c = make_case(64, 257, 4, 1, 64, mask_kind::m_window);
    c.window = 100;
    c.softcap = 20.0;
    add(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(cases, naive_baseline, ::testing::ValuesIn(naive_cases()),
                         [](const auto& info) { return gtest_name(info.param.c.id()); });

}  // namespace
}  // namespace numprobe::test
