// MX and NVFP4 block scaling against hand-derived vectors. Every expected value is derived in
// the comment next to it from the definitions in NUMERICS.md, never from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "numprobe/base/rng.hpp"
#include "numprobe/formats/scheme.hpp"

namespace nf = numprobe::formats;

namespace {

// e2m1 magnitudes by code 0..7 (NUMERICS.md: +-{0, .5, 1, 1.5, 2, 3, 4, 6}).
constexpr double k_e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

nf::scheme_config mx(nf::format_id elem, nf::mx_rule rule = nf::mx_rule::m_floor) {
  auto c = nf::find_scheme("mx").defaults;
  c.element = elem;
  c.rule = rule;
  return c;
}

// A 32-element MX block: slots 0..7 hand-set, the rest seeded random e2m1 grid values times
// 2^X (exactly representable, so they must come back unchanged with their own code).
struct mx_block {
  std::vector<double> x;
  std::vector<std::uint32_t> grid_code;  // for the random slots
};

mx_block make_mx_block(double scale, std::uint64_t seed) {
  mx_block b;
  b.x = {60, 10.4, 20, -1.6, 2, 2.4, -44, 36};
  b.grid_code.assign(32, 0);
  for (std::size_t i = b.x.size(); i < 32; ++i) {
    // codes 1..6 (0.5 .. 4) with a random sign: never zero, never the block max.
    const auto h = numprobe::counter_hash(seed, 1, i);
    const std::uint32_t mag = 1 + static_cast<std::uint32_t>(h % 6);
    const std::uint32_t sign = (h >> 8) & 1u;
    b.grid_code[i] = (sign << 3) | mag;
    b.x.push_back((sign ? -1 : 1) * k_e2m1[mag] * scale);
  }
  return b;
}

}  // namespace

TEST(scheme_mx, e2m1_floor_clips_block_max_in_6_to_8_times_2x) {
  const auto b = make_mx_block(8.0, 7);
  const auto q = nf::quantize(mx(nf::format_id::m_e2m1), b.x, 1, 32);
  ASSERT_EQ(q.blocks.size(), 1u);
  // amax = 60: floor(log2 60) = 5, X = 5 - emax(e2m1) = 5 - 2 = 3, e8m0 code 3 + 127 = 130.
  EXPECT_EQ(q.blocks[0].scale, 8.0);
  EXPECT_EQ(q.blocks[0].scale_code, 130u);
  EXPECT_EQ(q.blocks[0].argmax, 0);
  // 60 / 8 = 7.5 lies in (6, 8): clipped to 6 (code 0x7), dequant 48.
  EXPECT_EQ(q.codes[0], 0x7u);
  EXPECT_EQ(q.dequant[0], 48.0);
  // 10.4 / 8 = 1.3: nearer 1.5 (0.2) than 1 (0.3): code 3, dequant 12.
  EXPECT_EQ(q.codes[1], 0x3u);
  EXPECT_EQ(q.dequant[1], 12.0);
  // 20 / 8 = 2.5: a tie of 2 (mantissa 0) and 3 (mantissa 1): even -> 2, code 4, dequant 16.
  EXPECT_EQ(q.codes[2], 0x4u);
  EXPECT_EQ(q.dequant[2], 16.0);
  // -1.6 / 8 = -0.2 < 0.25: flushed to -0 (code 0x8).
  EXPECT_EQ(q.codes[3], 0x8u);
  EXPECT_EQ(q.dequant[3], 0.0);
  // 2 / 8 = 0.25: the tie of 0 and 0.5 goes to even (0): flushed.
  EXPECT_EQ(q.codes[4], 0x0u);
  // 2.4 / 8 = 0.3 -> 0.5 (code 1), dequant 4.
  EXPECT_EQ(q.codes[5], 0x1u);
  EXPECT_EQ(q.dequant[5], 4.0);
  // -44 / 8 = -5.5 -> nearer 6 (0.5) than 4 (1.5): code 0xF, dequant -48; inside range, no clip.
  EXPECT_EQ(q.codes[6], 0xFu);
  EXPECT_EQ(q.dequant[6], -48.0);
  // 36 / 8 = 4.5 -> 4 (code 6), dequant 32.
  EXPECT_EQ(q.codes[7], 0x6u);
  for (std::size_t i = 8; i < 32; ++i) {
    EXPECT_EQ(q.codes[i], b.grid_code[i]) << "slot " << i;
    EXPECT_EQ(q.dequant[i], b.x[i]) << "slot " << i;
  }
  // Clipped: only 60 (7.5 > 6). Flushed: -1.6 and 2.
  EXPECT_EQ(q.clipped, 1);
  EXPECT_EQ(q.flushed, 2);
  EXPECT_FALSE(q.blocks[0].scale_underflow);
}

TEST(scheme_mx, ceil_and_rceil_rules_never_clip) {
  const auto b = make_mx_block(8.0, 11);
  // rceil: X = ceil(log2(60 / 6)) = ceil(log2 10) = 4; ceil: ceil(log2 60) - 2 = 6 - 2 = 4.
  for (auto rule : {nf::mx_rule::m_ceil, nf::mx_rule::m_rceil}) {
    const auto q = nf::quantize(mx(nf::format_id::m_e2m1, rule), b.x, 1, 32);
    EXPECT_EQ(q.blocks[0].scale, 16.0) << nf::name(rule);
    EXPECT_EQ(q.blocks[0].scale_code, 131u);
    // 60 / 16 = 3.75 -> 4 (code 6), dequant 64; nothing exceeds 6 any more.
    EXPECT_EQ(q.codes[0], 0x6u);
    EXPECT_EQ(q.dequant[0], 64.0);
    EXPECT_EQ(q.clipped, 0);
  }
}

TEST(scheme_mx, ceil_and_rceil_differ_at_an_exact_max) {
  // amax = 48 = 6 * 2^3: rceil X = ceil(log2 8) = 3 (48 codes exactly as 6);
  // ceil X = ceil(log2 48) - 2 = 6 - 2 = 4 (48 / 16 = 3); floor X = 5 - 2 = 3.
  std::vector<double> x(32, 0.0);
  for (std::size_t i = 0; i < 32; ++i) x[i] = 0.5 + static_cast<double>(i % 7);  // <= 6.5
  x[13] = 48;
  const auto r = nf::quantize(mx(nf::format_id::m_e2m1, nf::mx_rule::m_rceil), x, 1, 32);
  const auto c = nf::quantize(mx(nf::format_id::m_e2m1, nf::mx_rule::m_ceil), x, 1, 32);
  const auto f = nf::quantize(mx(nf::format_id::m_e2m1, nf::mx_rule::m_floor), x, 1, 32);
  EXPECT_EQ(r.blocks[0].scale, 8.0);
  EXPECT_EQ(c.blocks[0].scale, 16.0);
  EXPECT_EQ(f.blocks[0].scale, 8.0);
  EXPECT_EQ(r.dequant[13], 48.0);
  EXPECT_EQ(c.dequant[13], 48.0);  // 3 x 16
  EXPECT_EQ(c.codes[13], 0x5u);    // 3 is code 5
  EXPECT_EQ(r.codes[13], 0x7u);    // 6 is code 7
}

TEST(scheme_mx, e4m3_elements_clip_above_448_times_2x) {
  // amax = 500: floor(log2 500) = 8, X = 8 - emax(e4m3) = 8 - 8 = 0; 500 > 448 clips to 448.
  std::vector<double> x(64);
  for (std::size_t i = 0; i < 64; ++i)
    x[i] = 1.0 + std::floor(numprobe::uniform_open01(3, 0, i) * 100);  // integers 1..100: exact
  x[5] = 500;
  x[33] = 100;    // block 1's amax: X = floor(log2 100) - 8 = -2, 100 / 2^-2 = 400 <= 448
  x[40] = -0.75;  // -0.75 / 2^-2 = -3: exact in e4m3
  const auto q = nf::quantize(mx(nf::format_id::m_e4m3fn), x, 1, 64);
  EXPECT_EQ(q.blocks[0].scale, 1.0);
  EXPECT_EQ(q.dequant[5], 448.0);
  EXPECT_EQ(q.codes[5], 0x7Eu);
  EXPECT_EQ(q.blocks[0].clipped, 1);
  EXPECT_EQ(q.blocks[1].scale, 0.25);
  // 400 = 1.1001b x 2^8 needs 4 mantissa bits; the e4m3 step there is 32, and 400 is the tie
  // of 384 (mantissa 100b, even) and 416 (101b): RNE gives 384, dequant 384 / 4 = 96.
  EXPECT_EQ(q.dequant[33], 96.0);
  EXPECT_EQ(q.dequant[40], -0.75);
  EXPECT_EQ(q.blocks[1].clipped, 0);
}

TEST(scheme_mx, mxint8_is_fixed_point_with_six_fraction_bits) {
  // amax = 3: X = floor(log2 3) - 0 = 1; 3 / 2 = 1.5 -> 1.5 x 64 = 96 (int8 code 96).
  // 0.01 / 2 x 64 = 0.32 -> 0: flushed. 1.03 / 2 x 64 = 32.96 -> 33, dequant 33 / 64 x 2.
  std::vector<double> x(32, 0.5);  // 0.5 / 2 x 64 = 16: exact
  x[0] = 3;
  x[1] = 0.01;
  x[2] = 1.03;
  const auto q = nf::quantize(mx(nf::format_id::m_i8), x, 1, 32);
  EXPECT_EQ(q.blocks[0].scale, 2.0);
  EXPECT_EQ(q.codes[0], 96u);
  EXPECT_EQ(q.dequant[0], 3.0);
  EXPECT_EQ(q.dequant[1], 0.0);
  EXPECT_EQ(q.dequant[2], 33.0 / 32.0);
  EXPECT_EQ(q.dequant[3], 0.5);
  EXPECT_EQ(q.flushed, 1);
}

TEST(scheme_nvfp4, one_outlier_flushes_neighbours_below_outlier_over_24) {
  // Tensor amax 2688 gives s_t = 2688 / (6 x 448) = 1 exactly (fp32).
  // Block 0: the outlier 2688 sets s_b = e4m3(2688 / 6) = 448 (code 0x7E). Elements are
  // e2m1(v / 448); v / 448 < 0.25, i.e. v < 112 = 2688 / 24, flushes, and v = 112 is the tie
  // 0.25 that RNE sends to 0.
  std::vector<double> x = {2688, 10, 50, 100, 111, 112, 113, -60,
                           200,  300, 448, 1000, 1500, 2000, 2400, -5};
  // dequant by hand: 2688/448 = 6 -> 2688; 113/448 = .252 -> .5 -> 224; 200/448 = .446 -> .5;
  // 300/448 = .67 -> .5; 448 -> 1; 1000/448 = 2.23 -> 2 -> 896; 1500/448 = 3.35 -> 3 -> 1344;
  // 2000/448 = 4.46 -> 4 -> 1792; 2400/448 = 5.36 -> 6 -> 2688.
  const std::vector<double> want0 = {2688, 0, 0, 0, 0, 0, 224, -0.0,
                                     224,  224, 448, 896, 1344, 1792, 2688, -0.0};
  // Block 1: amax 3 -> s_b = e4m3(3 / 6) = 0.5 (code 0x30); values on the e2m1 grid x 0.5.
  for (int i = 0; i < 16; ++i) x.push_back((i % 2 ? -1 : 1) * k_e2m1[1 + i % 7] * 0.5);
  // k_e2m1[1 + i % 7] reaches 6 at i = 6 and 13, so amax = 6 x 0.5 = 3.
  // Block 2: amax 1e-3 -> s_b ideal = 1e-3 / 6 = 1.7e-4, below half of e4m3's smallest
  // subnormal 2^-9 (9.8e-4): the block scale flushes to 0 and takes all 16 values with it.
  for (int i = 0; i < 16; ++i) x.push_back(1e-3 * (1 + i) / 16.0);
  const auto q = nf::quantize(nf::find_scheme("nvfp4").defaults, x, 1, 48);
  EXPECT_EQ(q.tensor_scale, 1.0);
  ASSERT_EQ(q.blocks.size(), 3u);
  EXPECT_EQ(q.blocks[0].scale_code, 0x7Eu);
  EXPECT_EQ(q.blocks[0].scale, 448.0);
  EXPECT_EQ(q.blocks[0].argmax, 0);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(q.dequant[i], want0[i]) << "element " << i;
  // Flushed by hand: 10, 50, 100, 111, 112, -60, -5 = 7 (none of block 0's values is zero).
  EXPECT_EQ(q.blocks[0].flushed, 7);
  EXPECT_EQ(q.blocks[1].scale_code, 0x30u);  // 0.5 = 2^-1: exponent field 6, mantissa 0
  EXPECT_EQ(q.blocks[1].scale, 0.5);
  for (std::size_t i = 16; i < 32; ++i) EXPECT_EQ(q.dequant[i], x[i]) << "element " << i;
  EXPECT_EQ(q.blocks[1].flushed, 0);
  EXPECT_TRUE(q.blocks[2].scale_underflow);
  EXPECT_EQ(q.blocks[2].flushed, 16);
  EXPECT_EQ(q.scale_underflow_blocks, 1);
  EXPECT_EQ(q.flushed, 7 + 16);
  EXPECT_EQ(q.clipped, 0);
}

TEST(scheme_nvfp4, tensor_scale_is_amax_over_2688_in_fp32) {
  // amax 1 -> s_t = fp32(1 / 2688); block amax 1 -> s_b = e4m3(1 / (6 s_t)) = e4m3(448) = 448.
  std::vector<double> x(16);
  for (int i = 0; i < 16; ++i) x[i] = 0.25 + 0.75 * numprobe::uniform_open01(5, 0, i);
  x[9] = -1.0;
  const auto q = nf::quantize(nf::find_scheme("nvfp4").defaults, x, 1, 16);
  EXPECT_EQ(q.tensor_scale, static_cast<double>(1.0f / 2688.0f));
  EXPECT_EQ(q.blocks[0].scale_code, 0x7Eu);
  EXPECT_EQ(q.dequant[9], -6.0 * 448.0 * static_cast<double>(1.0f / 2688.0f));
}

TEST(scheme_bits, bits_per_element_include_scales) {
  // mxfp4: 4 + 8/32. nvfp4: 4 + 8/16 + 32 / 4096^2. int4-awq: 4 + (16 + 4)/128.
  EXPECT_DOUBLE_EQ(nf::find_scheme("mxfp4").bits_per_element, 4.25);
  EXPECT_DOUBLE_EQ(nf::find_scheme("nvfp4").bits_per_element, 4.5 + 32.0 / (4096.0 * 4096.0));
  EXPECT_DOUBLE_EQ(nf::find_scheme("int4-awq").bits_per_element, 4.15625);
  // fp8-block128 on 4096x4096: 32 x 32 fp32 scales -> 8 + 1024 x 32 / 4096^2.
  EXPECT_DOUBLE_EQ(nf::find_scheme("fp8-block128").bits_per_element,
                   8 + 1024.0 * 32 / (4096.0 * 4096.0));
}
