// Packing layouts: hand-written words, round trips, and the 0x6400 trick against exact
// dequantization for every code.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "numprobe/base/rng.hpp"
#include "numprobe/formats/packing.hpp"

namespace nf = numprobe::formats;

namespace {

std::vector<std::uint8_t> seeded_nibbles(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>(numprobe::counter_hash(seed, 3, i) & 0xFu);
  return v;
}

}  // namespace

TEST(packing_fp4x2, element_2i_is_the_low_nibble_and_odd_counts_pad) {
  // Codes 0x1, 0xA, 0x7 -> bytes 0xA1 (1 low, A high), 0x07 (7 low, pad 0 high).
  const std::vector<std::uint8_t> codes = {0x1, 0xA, 0x7};
  const auto packed = nf::pack_nibbles(codes);
  ASSERT_EQ(packed.size(), 2u);
  EXPECT_EQ(packed[0], 0xA1);
  EXPECT_EQ(packed[1], 0x07);
  const auto many = seeded_nibbles(1001, 1);
  EXPECT_EQ(nf::unpack_nibbles(nf::pack_nibbles(many), many.size()), many);
}

TEST(packing_int4, sign_extension_of_every_nibble) {
  // Two's complement: 0..7 are themselves, 8..15 are n - 16.
  for (int n = 0; n < 16; ++n)
    EXPECT_EQ(nf::sign_extend_int4(static_cast<std::uint8_t>(n)), n < 8 ? n : n - 16);
}

TEST(packing_awq, order_0_2_4_6_1_3_5_7_in_int32) {
  // Columns 0..7 hold codes 1..8 (code = column + 1). Nibble i holds column order[i]:
  // nibbles (low to high) 1,3,5,7,2,4,6,8 -> word 0x86427531.
  const std::vector<std::uint8_t> codes = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto w = nf::pack_awq(codes, 1, 8);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], 0x86427531u);
}

class packing_int4_k : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(packing_int4_k, all_codes_in_every_nibble_position_round_trip) {
  const std::int64_t k = GetParam(), n = 16;
  // code (r, c) = (r + 3c) % 16: along K every nibble position (r % 8) of GPTQ's words sees
  // all 16 codes; along N (AWQ) every position (c % 8) does too, since K >= 16.
  std::vector<std::uint8_t> codes(k * n);
  for (std::int64_t r = 0; r < k; ++r)
    for (std::int64_t c = 0; c < n; ++c) codes[r * n + c] = static_cast<std::uint8_t>((r + 3 * c) % 16);
  EXPECT_EQ(nf::unpack_awq(nf::pack_awq(codes, k, n), k, n), codes);
  const auto g = nf::pack_gptq_weight(codes, k, n);
  EXPECT_EQ(g.size(), static_cast<std::size_t>((k + 7) / 8 * n));  // 196 pads to 200 rows
  EXPECT_EQ(nf::unpack_gptq_weight(g, k, n), codes);
  // GPTQ word (0, 0) holds rows 0..7 of column 0 in order: codes 0..7 -> 0x76543210.
  EXPECT_EQ(g[0], 0x76543210u);
  if (k % 8 != 0) {
    // K = 196: the last word of column 0 holds rows 192..195 (codes 0..3) and 4 zero pads.
    EXPECT_EQ(g[(k / 8) * n], 0x00003210u);
  }
}

INSTANTIATE_TEST_SUITE_P(k, packing_int4_k, ::testing::Values(196, 544),
                         [](const auto& info) { return "K" + std::to_string(info.param); });

TEST(packing_gptq, v1_stores_zero_minus_one_and_misreading_shifts_by_one) {
  // Zero points 7 and 8 over 16 columns: v1 stores 6 and 7, v2 stores 7 and 8.
  std::vector<std::uint8_t> z(16);
  for (int c = 0; c < 16; ++c) z[c] = c % 2 ? 8 : 7;
  const auto v1 = nf::pack_gptq_zeros(z, 1, 16, nf::gptq_version::m_v1);
  const auto v2 = nf::pack_gptq_zeros(z, 1, 16, nf::gptq_version::m_v2);
  EXPECT_EQ(v1[0], 0x76767676u);
  EXPECT_EQ(v2[0], 0x87878787u);
  const auto back1 = nf::unpack_gptq_zeros(v1, 1, 16, nf::gptq_version::m_v1);
  const auto back2 = nf::unpack_gptq_zeros(v2, 1, 16, nf::gptq_version::m_v2);
  const auto wrong = nf::unpack_gptq_zeros(v1, 1, 16, nf::gptq_version::m_v2);
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(back1[c], z[c]);
    EXPECT_EQ(back2[c], z[c]);
    EXPECT_EQ(wrong[c], z[c] - 1);  // v1 read as v2: every weight moves one scale step
  }
}

TEST(packing_fast_dequant, magic_0x6400_matches_exact_for_every_code_and_position) {
  // Every code q in every nibble position p, other nibbles seeded random. The output order of
  // the trick is nibbles [0, 4, 1, 5, 2, 6, 3, 7]; it must give q exactly (q < 2^11 is exact in
  // fp16), and q - 8 with Marlin's symmetric constants.
  constexpr int k_out_of_nibble[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // inverse of the order above
  for (int p = 0; p < 8; ++p)
    for (std::uint32_t q = 0; q < 16; ++q) {
      std::uint32_t word = static_cast<std::uint32_t>(numprobe::counter_hash(5, p, q));
      word = (word & ~(0xFu << (4 * p))) | (q << (4 * p));
      const auto h = nf::int4x8_to_f16_magic(word);
      const auto hs = nf::int4x8_to_f16_magic(word, true);
      EXPECT_EQ(nf::f16_value(h[k_out_of_nibble[p]]), static_cast<double>(q)) << p << " " << q;
      EXPECT_EQ(nf::f16_value(hs[k_out_of_nibble[p]]), static_cast<double>(q) - 8.0);
    }
}

TEST(packing_fast_dequant, awq_order_makes_the_trick_yield_natural_column_order) {
  const auto codes = seeded_nibbles(64, 8);  // 8 rows of 8 columns
  const auto words = nf::pack_awq(codes, 8, 8);
  for (int r = 0; r < 8; ++r) {
    const auto h = nf::int4x8_to_f16_magic(words[r]);
    for (int c = 0; c < 8; ++c) EXPECT_EQ(nf::f16_value(h[c]), codes[r * 8 + c]);
  }
}

TEST(packing_fast_dequant, fp16_zero_and_scale_path_equals_exact_rounding) {
  // Kernel path: fma(sub(q, z), s, 0) in fp16. Exact: (q - z) s rounded once to fp16. q - z is
  // an integer in [-15, 15], exact in fp16, so the two must agree bit for bit for all q, z.
  for (int t = 0; t < 64; ++t) {
    const double s = nf::f16_value(nf::f16_bits(std::ldexp(
        0.5 + numprobe::uniform_open01(6, 0, t), -static_cast<int>(t % 12))));
    const std::uint16_t sb = nf::f16_bits(s);
    for (std::uint32_t z = 0; z < 16; ++z) {
      const auto hz = nf::int4x8_to_f16_magic(z);  // nibble 0 -> output 0
      for (std::uint32_t q = 0; q < 16; ++q) {
        const auto hq = nf::int4x8_to_f16_magic(q << 16);  // nibble 4 -> output 1
        const std::uint16_t fast = nf::f16_fma(nf::f16_sub(hq[1], hz[0]), sb, 0);
        const std::uint16_t exact = nf::f16_bits((static_cast<double>(q) - z) * s);
        ASSERT_EQ(fast, exact) << "q " << q << " z " << z << " s " << s;
      }
    }
  }
}

TEST(packing_fp8_block, checkpoint_layout_round_trips_exactly) {
  // [130, 260] weight -> e4m3 bytes [130, 260] and weight_scale_inv [2, 3]; dequantizing the
  // checkpoint must reproduce quantize()'s dequant bit for bit.
  const std::int64_t rows = 130, cols = 260;
  std::vector<double> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = numprobe::normal_at(12, 0, i);
  const auto q = nf::quantize(nf::find_scheme("fp8-block128").defaults, x, rows, cols);
  const auto ck = nf::to_fp8_block_checkpoint(q);
  EXPECT_EQ(ck.weight_scale_inv.size(), 6u);
  EXPECT_EQ(nf::dequantize(ck), q.dequant);
  // A scale is the dequant multiplier: block (0, 0)'s amax element dequantizes to 448 x scale.
  const auto& b = q.blocks[0];
  EXPECT_EQ(std::fabs(nf::dequantize(ck)[b.argmax]), 448.0 * ck.weight_scale_inv[0]);
}
