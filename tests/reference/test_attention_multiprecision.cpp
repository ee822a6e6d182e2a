// The double reference against the same template run in cpp_bin_float_50 (166-bit
// significand): DESIGN.md's proof that the double paths' relative error is <= 1e-12.
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "numprobe/core/row_sampling.hpp"
#include "reference/attention_impl.hpp"
#include "reference/reference_cases.hpp"
#include "reference/reference_test_support.hpp"

namespace numprobe::test {
namespace {

using mp50 = boost::multiprecision::cpp_bin_float_50;

// The bound for the double reference (DESIGN.md): 1e-12 relative, about 10^4 unit
// roundoffs of double; the multiprecision result's own error (~1e-50) is negligible.
constexpr double k_bound = 1e-12;

// Logits of magnitude L (dist=shifted puts every logit near the shift) cannot be held in any
// double to better than L * u absolute, and the weights inherit that error; a D-term dot
// product's worst case is D * L * u (the standard gamma_D bound). Below 1e-12 it is moot.
double bound_for(const attention_case& c) {
  if (c.dist != input_dist::m_shifted) return k_bound;
  constexpr double u = 0x1.0p-53;
  return std::max(k_bound, static_cast<double>(c.head_dim) * std::fabs(c.logit_shift) * u);
}

class reference_vs_multiprecision : public ::testing::TestWithParam<attention_case> {};

TEST_P(reference_vs_multiprecision, relative_error_below_1e_12) {
  const attention_case& c = GetParam();
  // Multiprecision is slow: a stratified sample of rows (tile edges first) keeps the suite fast.
  const auto rows = sample_rows(c, row_sampling{.max_rows = 24, .tile_q = 64, .tile_k = 64, .seed = 3});
  const case_data d = make_case_data(c, rows);
  const attention_output exact = reference::attention_generic<mp50>(c, d.q, d.rows, d.k, d.v);
  const attention_output fast = reference::attention(c, d.q, d.rows, d.k, d.v);
  const attention_output generic = reference::attention_generic<double>(c, d.q, d.rows, d.k, d.v);
  const row_error e_fast = max_row_error(fast, exact);
  const row_error e_generic = max_row_error(generic, exact);
  const double bound = bound_for(c);
  EXPECT_LE(e_fast.o, bound) << c.id();
  EXPECT_LE(e_fast.lse, bound) << c.id();
  EXPECT_LE(e_generic.o, bound) << c.id();
  EXPECT_LE(e_generic.lse, bound) << c.id();
  RecordProperty("fast_o_err", fmt::format("{:.3g}", e_fast.o));
  RecordProperty("generic_o_err", fmt::format("{:.3g}", e_generic.o));
}

INSTANTIATE_TEST_SUITE_P(cases, reference_vs_multiprecision, ::testing::ValuesIn(reference_cases()),
                         [](const auto& info) { return gtest_name(info.param.id()); });

}  // namespace
}  // namespace numprobe::test
