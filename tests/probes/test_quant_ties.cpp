// `--dist ties` (issue 17): the generator must put scaled elements on rounding midpoints, block
// scales across e4m3's subnormal boundary and amax at the scale rules' edges, because random
// data hides the differences between quantizer conventions. The expected properties are
// checked with the reference quantizer (formats::quantize) and a reciprocal-multiply rounding
// written out here, not with the generator's own arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/formats/scheme.hpp"
#include "probes/quant/quant_inputs.hpp"

namespace np = numprobe;
namespace nf = numprobe::formats;
using np::probes::make_quant_input;
using np::probes::quant_dist;

namespace {

constexpr std::int64_t k_rows = 96, k_cols = 160;  // not multiples of 64: partial tiles of the grid

bool is_e2m1_midpoint(double q) {
  for (double m : {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0})
    if (std::fabs(q) == m) return true;
  return false;
}

// NVFP4 element coding the way a reciprocal-multiplying quantizer does it: fp32 x * fp32(1 / s).
double e2m1_by_reciprocal(double x, double s) {
  const float inv = 1.0f / static_cast<float>(s);
  return nf::round_to(nf::format_id::m_e2m1, static_cast<double>(static_cast<float>(x) * inv));
}

struct tie_counts {
  std::int64_t midpoints = 0, reciprocal_diffs = 0, subnormal_scales = 0, normal_scales = 0;
};

tie_counts count(const nf::scheme_config& c, const std::vector<double>& x) {
  const auto q = nf::quantize(c, x, k_rows, k_cols);
  tie_counts t;
  for (std::int64_t br = 0; br < q.grid.grid_rows; ++br)
    for (std::int64_t bc = 0; bc < q.grid.grid_cols; ++bc) {
      const auto& b = q.blocks[static_cast<std::size_t>(br * q.grid.grid_cols + bc)];
      // e4m3fn code: exponent field 0 is a subnormal (or zero).
      if (c.kind == nf::scheme_kind::m_nvfp4 && b.scale_code != 0)
        ((b.scale_code & 0x78u) == 0 ? t.subnormal_scales : t.normal_scales) += 1;
      for (std::int64_t r = b.row0; r < b.row0 + b.rows; ++r)
        for (std::int64_t col = b.col0; col < b.col0 + b.cols; ++col) {
          const double v = x[static_cast<std::size_t>(r * k_cols + col)];
          if (b.scale == 0) continue;
          t.midpoints += is_e2m1_midpoint(v / b.scale) ? 1 : 0;
          const double exact = nf::round_to(nf::format_id::m_e2m1, v / b.scale);
          t.reciprocal_diffs += exact != e2m1_by_reciprocal(v, b.scale) ? 1 : 0;
        }
    }
  return t;
}

}  // namespace

TEST(QuantTies, Nvfp4BlocksSitOnMidpointsAndCrossTheSubnormalBoundary) {
  const auto c = nf::find_scheme("nvfp4").defaults;
  const auto x = make_quant_input(quant_dist::m_ties, 7, k_rows, k_cols, c);
  // The anchor block makes the tensor scale exactly 0.8125: amax 6 x 448 x 0.8125.
  double amax = 0;
  for (double v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(amax, 2184.0);
  const auto q = nf::quantize(c, x, k_rows, k_cols);
  EXPECT_EQ(q.tensor_scale, 0.8125);
  const auto t = count(c, x);
  const auto n = static_cast<double>(x.size());
  // Half the blocks are tie blocks, three in four of their elements midpoints: about 0.35 of
  // all elements. A quarter is a generous floor that still fails a generator without ties.
  EXPECT_GT(static_cast<double>(t.midpoints) / n, 0.25) << t.midpoints;
  EXPECT_GT(t.subnormal_scales, 0);
  EXPECT_GT(t.normal_scales, 0);
  // The point of it: exact division and reciprocal multiplication code differently here.
  EXPECT_GT(t.reciprocal_diffs, 0);

  // Random data of the same shape: no midpoints (a double from a normal distribution is a
  // midpoint times an e4m3 scale with probability ~0).
  const auto r = make_quant_input(quant_dist::m_normal, 7, k_rows, k_cols, c);
  EXPECT_EQ(count(c, r).midpoints, 0);
}

TEST(QuantTies, MxBlocksHavePowerOfTwoScalesAndMidpoints) {
  const auto c = nf::find_scheme("mxfp4").defaults;
  const auto x = make_quant_input(quant_dist::m_ties, 11, k_rows, k_cols, c);
  const auto t = count(c, x);
  EXPECT_GT(static_cast<double>(t.midpoints) / static_cast<double>(x.size()), 0.25) << t.midpoints;
}

TEST(QuantTies, DeterministicPerSeedAndBlockLocal) {
  const auto c = nf::find_scheme("nvfp4").defaults;
  const auto a = make_quant_input(quant_dist::m_ties, 3, k_rows, k_cols, c);
  EXPECT_EQ(a, make_quant_input(quant_dist::m_ties, 3, k_rows, k_cols, c));
  EXPECT_NE(a, make_quant_input(quant_dist::m_ties, 4, k_rows, k_cols, c));
  for (double v : a) ASSERT_TRUE(std::isfinite(v));
}

// e8m0 has no sign: every generated element is positive, so the plain cast yields no NaN (a
// negative input to e8m0 is NaN, which would make the ties input useless there).
TEST(QuantTies, UnsignedElementsStayPositive) {
  auto c = nf::find_scheme("nvfp4").defaults;
  c.kind = nf::scheme_kind::m_none;
  c.element = nf::format_id::m_e8m0;
  const auto x = make_quant_input(quant_dist::m_ties, 2, 8, 64, c);
  for (double v : x) ASSERT_GT(v, 0.0);
}

TEST(QuantTies, WideElementFormatsAndSchemelessCallsAreRefused) {
  auto c = nf::find_scheme("nvfp4").defaults;
  c.kind = nf::scheme_kind::m_none;
  c.element = nf::format_id::m_bf16;
  try {
    (void)make_quant_input(quant_dist::m_ties, 1, 4, 32, c);
    FAIL() << "bf16 elements accepted";
  } catch (const np::error& e) {
    EXPECT_EQ(e.code(), np::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("--dist"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)make_quant_input(quant_dist::m_ties, 1, 4, 32), np::error);
}
