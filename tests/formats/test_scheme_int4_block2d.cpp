// int4 AWQ groups and DeepSeek-V3 2D blocks against hand-derived vectors (NUMERICS.md).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/formats/scheme.hpp"

namespace nf = numprobe::formats;

namespace {

// A weight [n, k] whose code at (r, c) is (c + 3r) % 16: every group of >= 16 consecutive
// columns holds codes 0 and 15, and every residue class r % 8 sees all 16 codes.
// Group g of a row gets zero point 7 (even g) or 8 (odd g) and scale 0.5, so by the AWQ
// definitions: max - min = (15 - z) s - (0 - z) s = 15 s -> s = 0.5 (exact in fp16), and
// z = -round(min / s) = -round(-z) = z. Values (q - z) s are then coded exactly as q.
struct awq_case {
  std::int64_t n, k;
  std::vector<double> x;
  std::vector<std::uint8_t> q;
  [[nodiscard]] static int zero_of(std::int64_t c) { return (c / 128) % 2 ? 8 : 7; }
};

awq_case make_awq(std::int64_t n, std::int64_t k) {
  awq_case a{n, k, {}, {}};
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      const auto q = static_cast<std::uint8_t>((c + 3 * r) % 16);
      a.q.push_back(q);
      a.x.push_back((q - awq_case::zero_of(c)) * 0.5);
    }
  return a;
}

}  // namespace

class scheme_awq : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(scheme_awq, codes_zero_points_and_scales_for_partial_last_group) {
  const std::int64_t k = GetParam();
  const auto a = make_awq(8, k);
  const auto res = nf::quantize(nf::find_scheme("int4-awq").defaults, a.x, a.n, a.k);
  // K = 196 -> groups 128 + 68; K = 544 -> 4 x 128 + 32.
  const std::int64_t groups = (k + 127) / 128;
  ASSERT_EQ(res.grid.grid_cols, groups);
  ASSERT_EQ(res.blocks.back().cols, k - 128 * (groups - 1));
  for (std::int64_t r = 0; r < a.n; ++r)
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto& b = res.blocks[static_cast<std::size_t>(r * groups + g)];
      EXPECT_EQ(b.scale, 0.5);
      EXPECT_EQ(b.scale_code, 0x3800u);  // fp16 0.5: exponent 14, mantissa 0
      EXPECT_EQ(b.zero_point, awq_case::zero_of(g * 128));
    }
  for (std::size_t i = 0; i < a.x.size(); ++i) {
    ASSERT_EQ(res.codes[i], a.q[i]) << "element " << i;
    ASSERT_EQ(res.dequant[i], a.x[i]) << "element " << i;
  }
  EXPECT_EQ(res.clipped, 0);
}

INSTANTIATE_TEST_SUITE_P(k, scheme_awq, ::testing::Values(196, 544),
                         [](const auto& info) { return "K" + std::to_string(info.param); });

TEST(scheme_awq_rounding, ties_go_to_even_and_positive_groups_clamp_z_to_0) {
  // Group: min -0.75, max 3 -> s = 3.75 / 15 = 0.25, z = -round(-3) = 3.
  // 0.125 / 0.25 = 0.5 -> RNE 0 -> q = 3, dequant 0 (flushed); 0.375 -> 1.5 -> 2 -> q 5, 0.5.
  std::vector<double> x(128);
  for (int i = 0; i < 128; ++i) x[i] = 0.25 * (1 + i % 11) - 0.75;  // -0.5 .. 2: on the grid
  x[0] = -0.75;
  x[1] = 3.0;
  x[2] = 0.125;
  x[3] = 0.375;
  // Second group, all positive: min 1, max 4 -> s = 0.2 (fp16 0.199951171875), z = -round(5.0)
  // clamped to 0; 1 / s = 5.0012 -> q = 5; dequant 5 s.
  for (int i = 0; i < 128; ++i) x.push_back(1.0 + 3.0 * (i % 2));
  const auto res = nf::quantize(nf::find_scheme("int4-awq").defaults, x, 1, 256);
  EXPECT_EQ(res.blocks[0].scale, 0.25);
  EXPECT_EQ(res.blocks[0].zero_point, 3);
  EXPECT_EQ(res.codes[2], 3u);
  EXPECT_EQ(res.dequant[2], 0.0);
  EXPECT_EQ(res.codes[3], 5u);
  EXPECT_EQ(res.dequant[3], 0.5);
  EXPECT_EQ(res.blocks[0].flushed, 1);
  const double s16 = 0.199951171875;  // fp16 RNE of 0.2: 0x3A66 = 1.599609375 x 2^-3
  EXPECT_EQ(res.blocks[1].scale, s16);
  EXPECT_EQ(res.blocks[1].zero_point, 0);
  EXPECT_EQ(res.codes[128], 5u);            // 1 / s16 = 5.0012 -> 5
  EXPECT_EQ(res.dequant[128], 5 * s16);
  EXPECT_EQ(res.codes[129], 15u);           // 4 / s16 = 20.005 -> clamped to 15: clipped
  EXPECT_EQ(res.blocks[1].clipped, 64);
}

TEST(scheme_int4_sym, scale_is_amax_over_7) {
  // amax 3.5 -> s = 0.5; -3.5 -> -7; 1.25 / 0.5 = 2.5 -> RNE 2 -> 1.0; 0.2 / 0.5 = 0.4 -> 0.
  std::vector<double> x(128);
  for (int i = 0; i < 128; ++i) x[i] = 0.5 * ((i % 13) - 6);  // -3 .. 3: exact
  x[7] = -3.5;
  x[8] = 1.25;
  x[9] = 0.2;
  const auto res = nf::quantize(nf::find_scheme("int4-sym").defaults, x, 1, 128);
  EXPECT_EQ(res.blocks[0].scale, 0.5);
  EXPECT_EQ(res.codes[7], 0x9u);  // -7 in 4-bit two's complement
  EXPECT_EQ(res.dequant[7], -3.5);
  EXPECT_EQ(res.dequant[8], 1.0);
  EXPECT_EQ(res.dequant[9], 0.0);
  EXPECT_EQ(res.flushed, 1);
}

TEST(scheme_block2d, partial_blocks_of_a_130x200_weight) {
  // 128x128 blocks over [130, 200]: a 2 x 2 grid; block (1, 1) is 2 x 72.
  // Each block's values are e4m3 grid points (|v| <= 240, i.e. below the block max) times its
  // scale; one element per block is 448 x scale, so s = amax / 448 is that scale exactly.
  const double scales[4] = {0.5, 0.0078125, 3.0, 2.0};
  const std::int64_t rows = 130, cols = 200;
  std::vector<double> x(rows * cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const int blk = static_cast<int>((r / 128) * 2 + c / 128);
      // A random e4m3 value in [1, 240]: 1.m x 2^e with 3 mantissa bits, e in 0..6 (<= 240).
      const auto h = numprobe::counter_hash(9, 2, static_cast<std::uint64_t>(r * cols + c));
      const double m = 1.0 + static_cast<double>(h % 8) / 8.0;
      const int e = static_cast<int>((h >> 8) % 7);
      x[r * cols + c] = ((h >> 16) & 1 ? -1 : 1) * std::ldexp(m, e) * scales[blk];
    }
  const std::int64_t max_at[4][2] = {{3, 5}, {100, 199}, {129, 0}, {128, 130}};
  for (int b = 0; b < 4; ++b) x[max_at[b][0] * cols + max_at[b][1]] = -448 * scales[b];
  const auto res = nf::quantize(nf::find_scheme("fp8-block128").defaults, x, rows, cols);
  ASSERT_EQ(res.grid.grid_rows, 2);
  ASSERT_EQ(res.grid.grid_cols, 2);
  EXPECT_EQ(res.blocks[3].rows, 2);
  EXPECT_EQ(res.blocks[3].cols, 72);
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(res.blocks[b].scale, scales[b]) << "block " << b;
    EXPECT_EQ(res.blocks[b].argmax, max_at[b][0] * cols + max_at[b][1]);
    EXPECT_EQ(res.codes[max_at[b][0] * cols + max_at[b][1]], 0xFEu);  // -448
  }
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(res.dequant[i], x[i]) << "element " << i;
  EXPECT_EQ(res.flushed + res.clipped, 0);
}

TEST(scheme_block2d, activation_tiles_floor_amax_and_round_scale_up_to_pow2) {
  // A 1x128 tile of tiny values: s = max(1e-6, 1e-4) / 448 = 2.232e-7.
  // ue8m0: 2^ceil(log2 2.232e-7) = 2^ceil(-22.09) = 2^-22 (e8m0 code 105).
  std::vector<double> x(256);
  for (int i = 0; i < 128; ++i) x[i] = 1e-6 * numprobe::uniform_open01(4, 0, i);
  // Tile 2: amax 300 -> s = 300 / 448 = 0.6696 -> 2^0 = 1 (e8m0 code 127); 300 codes exactly
  // as 1.0010110b x 2^8 -> step 32 in e4m3 -> 288 (nearer than 320).
  for (int i = 128; i < 256; ++i) x[i] = 1.0 + (i % 5);
  x[200] = 300;
  auto c = nf::find_scheme("fp8-act1x128-ue8m0").defaults;
  const auto res = nf::quantize(c, x, 1, 256);
  EXPECT_EQ(res.blocks[0].scale, std::ldexp(1.0, -22));
  EXPECT_EQ(res.blocks[0].scale_code, 105u);
  EXPECT_EQ(res.blocks[1].scale, 1.0);
  EXPECT_EQ(res.dequant[200], 288.0);
  const auto f32 = nf::quantize(nf::find_scheme("fp8-act1x128").defaults, x, 1, 256);
  EXPECT_EQ(f32.blocks[0].scale, static_cast<double>(static_cast<float>(1e-4 / 448)));
  EXPECT_EQ(f32.blocks[1].scale, static_cast<double>(static_cast<float>(300.0 / 448)));
}

TEST(scheme_registry, unknown_names_and_bad_configs_are_input_errors) {
  EXPECT_THROW((void)nf::find_scheme("mx9"), numprobe::error);
  auto c = nf::find_scheme("int4-awq").defaults;
  c.element = nf::format_id::m_i4;
  std::vector<double> x(8, 1.0);
  EXPECT_THROW((void)nf::quantize(c, x, 1, 8), numprobe::error);
  EXPECT_THROW((void)nf::quantize(nf::find_scheme("mxfp4").defaults, x, 2, 8), numprobe::error);
}
