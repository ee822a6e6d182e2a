// The convention axes (numprobe/formats/conventions.hpp) on hand-computed blocks: each value
// below is derived in the comment next to it from the arithmetic of docs/quant-conventions.md.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/scheme.hpp"

namespace nf = numprobe::formats;

namespace {

nf::scheme_config nvfp4(nf::scale_division d, nf::scale_floor f = nf::scale_floor::m_subnormal,
                        nf::scale_arith a = nf::scale_arith::m_double) {
  auto c = nf::find_scheme("nvfp4").defaults;
  c.conv = {d, f, a};
  return c;
}

// Block 0 holds 2688 = 6 * 448, so s_t = fp32(2688 / 2688) = 1 and s_b = x's block amax / 6.
// Block 1: amax 11.25, s_b = e4m3(1.875) = 1.875 (0x3F). 2.34375 = 1.25 s_b and 4.6875 = 2.5 s_b
// sit on E2M1 midpoints: exact division gives the ties to even, 1 (code 2) and 2 (code 4);
// fp32(1 / 1.875) = 0.53333336 lies above 8/15, so t = fp32(x r) = 1.2500001 and 2.5000002,
// which round up to 1.5 (code 3) and 3 (code 5).
std::vector<double> midpoint_tensor() {
  std::vector<double> x(32, 0.0);
  x[0] = 2688.0;
  x[16] = 11.25;
  x[17] = 2.34375;
  x[18] = 4.6875;
  return x;
}

TEST(conventions, reciprocal_division_moves_midpoints_up) {
  const auto x = midpoint_tensor();
  const auto e = nf::quantize(nvfp4(nf::scale_division::m_exact), x, 1, 32);
  ASSERT_EQ(e.tensor_scale, 1.0);
  EXPECT_EQ(e.blocks[1].scale_code, 0x3Fu);
  EXPECT_EQ(e.codes[17], 2u);
  EXPECT_EQ(e.codes[18], 4u);
  for (auto d : {nf::scale_division::m_reciprocal, nf::scale_division::m_reciprocal_approx}) {
    const auto r = nf::quantize(nvfp4(d), x, 1, 32);
    EXPECT_EQ(r.blocks[1].scale_code, 0x3Fu);
    EXPECT_EQ(r.codes[17], 3u) << nf::name(d);
    EXPECT_EQ(r.codes[18], 5u) << nf::name(d);
    EXPECT_EQ(r.dequant[17], 1.5 * 1.875);
  }
}

// Block 1 amax 6 * 2^-9 under s_t = 1: the ideal s_b is 2^-9, e4m3's smallest subnormal (code
// 0x01); min-normal clamps it to 2^-6 (code 0x08), so 6 * 2^-9 scales to 0.75 and codes 1.0
// (the tie goes to even), dequant 2^-6. An all-zero block: code 0x00 vs 0x08.
TEST(conventions, min_normal_floor_clamps_block_scales) {
  std::vector<double> x(48, 0.0);
  x[0] = 2688.0;
  x[16] = 6.0 * 0x1.0p-9;
  const auto s = nf::quantize(nvfp4(nf::scale_division::m_exact), x, 1, 48);
  EXPECT_EQ(s.blocks[1].scale_code, 0x01u);
  EXPECT_EQ(s.codes[16], 7u);  // 6
  EXPECT_EQ(s.blocks[2].scale_code, 0x00u);
  const auto m = nf::quantize(nvfp4(nf::scale_division::m_exact, nf::scale_floor::m_min_normal), x, 1, 48);
  EXPECT_EQ(m.blocks[1].scale_code, 0x08u);
  EXPECT_EQ(m.codes[16], 2u);  // 1.0
  EXPECT_EQ(m.dequant[16], 0x1.0p-6);
  EXPECT_EQ(m.blocks[2].scale_code, 0x08u);
  EXPECT_EQ(m.codes[33], 0u);
}

// fp32 arithmetic: amax = 6 (1 + 2^-23) (an fp32 value) and s_t = 1 give amax / 6 = 1 + 2^-23
// exactly in double, and e4m3 rounds it to 1 either way; the difference shows where fp32
// rounds amax / 6 onto an e4m3 midpoint: amax = 6 * 1.0625 * (1 + 2^-26) is not an fp32 value
// but f32 of it is 6.375, and 6.375 / 6 = 1.0625 (the midpoint of 1 and 1.125, ties to even: 1,
// code 0x38); in double amax / 6 is above the midpoint: 1.125 (0x39).
TEST(conventions, fp32_scale_arithmetic_rounds_step_by_step) {
  std::vector<double> x(32, 0.0);
  x[0] = 2688.0;
  x[16] = 6.0 * 1.0625 * (1.0 + 0x1.0p-26);
  const auto d = nf::quantize(nvfp4(nf::scale_division::m_exact), x, 1, 32);
  EXPECT_EQ(d.blocks[1].scale_code, 0x39u);
  const auto f = nf::quantize(nvfp4(nf::scale_division::m_exact, nf::scale_floor::m_subnormal,
                                    nf::scale_arith::m_fp32), x, 1, 32);
  EXPECT_EQ(f.blocks[1].scale_code, 0x38u);
}

nf::block_stats mx_block(const char* scheme, nf::mx_rule r, double amax) {
  auto c = nf::find_scheme(scheme).defaults;
  c.rule = r;
  std::vector<double> x(32, 0.0);
  x[0] = amax;
  return nf::quantize(c, x, 1, 32).blocks[0];
}

TEST(conventions, mx_rules_by_hand) {
  using r = nf::mx_rule;
  // ao#2035: amax 150, e4m3 elements (emax 8, max 448): rceil X = ceil(log2(150/448)) = -1
  // (code 126); ceil X = 8 - 8 = 0 (127); floor X = 7 - 8 = -1 (126).
  EXPECT_EQ(mx_block("mxfp8", r::m_rceil, 150.0).scale_code, 126u);
  EXPECT_EQ(mx_block("mxfp8", r::m_ceil, 150.0).scale_code, 127u);
  EXPECT_EQ(mx_block("mxfp8", r::m_floor, 150.0).scale_code, 126u);
  // even, e2m1 (1 mantissa bit): amax 7 = 1.75 * 4 rounds to 2 * 4 (the tie goes up), X = 3 - 2
  // = 1 (code 128); amax 6.99 stays 1.5 * 4, X = 0 (127); floor gives 0 for both.
  EXPECT_EQ(mx_block("mxfp4", r::m_even, 7.0).scale_code, 128u);
  EXPECT_EQ(mx_block("mxfp4", r::m_even, 6.99).scale_code, 127u);
  EXPECT_EQ(mx_block("mxfp4", r::m_floor, 7.0).scale_code, 127u);
  // even, e4m3 (3 bits): the carry starts at 1.9375 * 2^e: 248 -> X = 8 - 8 = 0, 247 -> -1.
  EXPECT_EQ(mx_block("mxfp8", r::m_even, 248.0).scale_code, 127u);
  EXPECT_EQ(mx_block("mxfp8", r::m_even, 247.0).scale_code, 126u);
  // nearest: log2(5.66) = 2.50 rounds to 3 (5.66 / 4 = 1.415 >= sqrt 2), X = 1; log2(5.65)
  // = 2.498 rounds to 2, X = 0.
  EXPECT_EQ(mx_block("mxfp4", r::m_nearest, 5.66).scale_code, 128u);
  EXPECT_EQ(mx_block("mxfp4", r::m_nearest, 5.65).scale_code, 127u);
}

TEST(conventions, names_parse_and_refusals) {
  EXPECT_EQ(nf::parse_scale_division("reciprocal-approx"), nf::scale_division::m_reciprocal_approx);
  EXPECT_EQ(nf::parse_scale_floor("min-normal"), nf::scale_floor::m_min_normal);
  EXPECT_EQ(nf::parse_scale_arith("fp32"), nf::scale_arith::m_fp32);
  EXPECT_EQ(nf::parse_mx_rule("even"), nf::mx_rule::m_even);
  EXPECT_EQ(nf::parse_mx_rule("nearest"), nf::mx_rule::m_nearest);
  EXPECT_THROW((void)nf::parse_scale_division("fast"), numprobe::error);
  auto c = nf::find_scheme("mxfp4").defaults;
  c.conv.division = nf::scale_division::m_reciprocal;
  EXPECT_THROW(nf::validate(c, 1, 32), numprobe::error);  // an NVFP4 axis on MX
  EXPECT_EQ(nf::convention_variants(nf::find_scheme("nvfp4").defaults).size(), 12u);
  EXPECT_EQ(nf::convention_variants(nf::find_scheme("mxfp4").defaults).size(), 5u);
  EXPECT_EQ(nf::convention_variants(nf::find_scheme("fp8-tensor").defaults).size(), 1u);
  EXPECT_EQ(nf::conventions_text(nf::find_scheme("nvfp4").defaults),
            "scale_division=exact scale_floor=subnormal scale_arith=double");
  auto t = nf::find_scheme("nvfp4").defaults;
  nf::apply_convention_preset("torchao", t);
  EXPECT_EQ(nf::conventions_text(t), "scale_division=reciprocal scale_floor=min-normal scale_arith=fp32");
  EXPECT_THROW(nf::apply_convention_preset("nobody", t), numprobe::error);
}

// e8m0 as a plain cast (ml_dtypes float8_e8m0fnu): powers of two, ties up, no zero or sign.
TEST(conventions, e8m0_plain_cast) {
  auto c = nf::find_scheme("none").defaults;
  c.element = nf::format_id::m_e8m0;
  c.over = nf::overflow::m_nan;  // ml_dtypes: beyond 2^127 is NaN (0xFF)
  const std::vector<double> x{1.0, 0.75, 3.0, 0.0, -2.0, 0x1.0p-130, 0x1.8p127};
  const auto q = nf::quantize(c, x, 1, static_cast<std::int64_t>(x.size()));
  const std::vector<std::uint32_t> want{127, 127, 129, 255, 255, 0, 255};
  EXPECT_EQ(q.codes, want);
  c.kind = nf::scheme_kind::m_mx;
  EXPECT_THROW(nf::validate(c, 1, 32), numprobe::error);  // e8m0 elements are a plain cast only
}

}  // namespace
