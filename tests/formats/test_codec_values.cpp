// Decode and RNE encode at hand-derived points: named codes, every fp4 code, ties, overflow
// thresholds, subnormal boundaries, NaN and zero conventions. Each expected value is worked
// out from the format's layout in the comment beside it, never from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "numprobe/formats/format.hpp"

namespace nf = numprobe::formats;
using nf::format_id;
using nf::overflow;
using nf::rounding;

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

std::uint32_t rne(format_id f, double x, overflow o = overflow::m_format_default) {
  return nf::encode(f, x, rounding::m_nearest_even, o);
}

TEST(decode, named_codes) {
  EXPECT_EQ(nf::decode(format_id::m_e4m3fn, 0x7E), 448.0);       // 0 1111 110: 1.75 * 2^8
  EXPECT_TRUE(std::isnan(nf::decode(format_id::m_e4m3fn, 0x7F)));  // S 1111 111 is NaN
  EXPECT_TRUE(std::isnan(nf::decode(format_id::m_e4m3fn, 0xFF)));
  EXPECT_TRUE(std::signbit(nf::decode(format_id::m_e4m3fn, 0x80)));  // -0 exists in fn
  EXPECT_EQ(nf::decode(format_id::m_e4m3fn, 0x01), 0x1p-9);        // subnormal 1/8 * 2^-6
  EXPECT_EQ(nf::decode(format_id::m_e4m3fn, 0x08), 0x1p-6);        // min normal
  EXPECT_EQ(nf::decode(format_id::m_e4m3fnuz, 0x7F), 240.0);       // 1.875 * 2^(15-8)
  EXPECT_TRUE(std::isnan(nf::decode(format_id::m_e4m3fnuz, 0x80)));  // the only NaN
  EXPECT_EQ(nf::decode(format_id::m_e4m3fnuz, 0xFF), -240.0);
  EXPECT_EQ(nf::decode(format_id::m_e4m3fnuz, 0x01), 0x1p-10);     // 1/8 * 2^(1-8)
  EXPECT_EQ(nf::decode(format_id::m_e5m2, 0x7B), 57344.0);         // 1.75 * 2^15
  EXPECT_EQ(nf::decode(format_id::m_e5m2, 0x7C), k_inf);
  EXPECT_EQ(nf::decode(format_id::m_e5m2, 0xFC), -k_inf);
  EXPECT_TRUE(std::isnan(nf::decode(format_id::m_e5m2, 0x7D)));
  EXPECT_EQ(nf::decode(format_id::m_e5m2, 0x01), 0x1p-16);         // 1/4 * 2^-14
  EXPECT_EQ(nf::decode(format_id::m_e5m2fnuz, 0x7F), 57344.0);     // 1.75 * 2^(31-16)
  EXPECT_TRUE(std::isnan(nf::decode(format_id::m_e5m2fnuz, 0x80)));
  EXPECT_EQ(nf::decode(format_id::m_e5m2fnuz, 0x01), 0x1p-17);
  EXPECT_EQ(nf::decode(format_id::m_e2m3, 0x1F), 7.5);             // 1.875 * 2^(3-1)
  EXPECT_EQ(nf::decode(format_id::m_e2m3, 0x01), 0.125);           // 1/8 * 2^0
  EXPECT_EQ(nf::decode(format_id::m_e3m2, 0x1F), 28.0);            // 1.75 * 2^(7-3)
  EXPECT_EQ(nf::decode(format_id::m_e3m2, 0x01), 0.0625);          // 1/4 * 2^-2
  EXPECT_EQ(nf::decode(format_id::m_e8m0, 0x00), 0x1p-127);
  EXPECT_EQ(nf::decode(format_id::m_e8m0, 0x7F), 1.0);
  EXPECT_EQ(nf::decode(format_id::m_e8m0, 0xFE), 0x1p127);
  EXPECT_TRUE(std::isnan(nf::decode(format_id::m_e8m0, 0xFF)));
  EXPECT_EQ(nf::decode(format_id::m_f16, 0x7BFF), 65504.0);
  EXPECT_EQ(nf::decode(format_id::m_f16, 0x0001), 0x1p-24);
  EXPECT_EQ(nf::decode(format_id::m_bf16, 0x3F80), 1.0);
  EXPECT_EQ(nf::decode(format_id::m_bf16, 0x0001), 0x1p-133);
  EXPECT_EQ(nf::decode(format_id::m_tf32, 0x3F802000), 1.0 + 0x1p-10);  // mantissa lsb 13
  EXPECT_EQ(nf::decode(format_id::m_tf32, 0x3F801FFF), 1.0);  // bits below tf32 are ignored
  EXPECT_EQ(nf::decode(format_id::m_i8, 0x80), -128.0);
  EXPECT_EQ(nf::decode(format_id::m_i4, 0x8), -8.0);  // two's complement nibble
  EXPECT_EQ(nf::decode(format_id::m_i4, 0xF), -1.0);
  EXPECT_EQ(nf::decode(format_id::m_u4, 0xF), 15.0);
}

TEST(decode, every_e2m1_code) {
  // S EE M, bias 1: codes 0..7 are 0, .5 (subnormal), 1, 1.5, 2, 3, 4, 6; 8..15 negate them.
  const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (std::uint32_t c = 0; c < 16; ++c) {
    const double v = nf::decode(format_id::m_e2m1, c);
    EXPECT_EQ(std::fabs(v), mags[c & 7]) << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << c;
  }
}

// Every non-NaN code of a <= 8-bit format survives decode then encode (RNE of a grid value
// is itself; -0 keeps its sign where the format has one).
class round_trip : public ::testing::TestWithParam<format_id> {};
TEST_P(round_trip, every_code) {
  const auto id = GetParam();
  const int bits = nf::info(id).bits;
  for (std::uint32_t c = 0; c < (1u << bits); ++c) {
    const double v = nf::decode(id, c);
    if (std::isnan(v)) continue;
    EXPECT_EQ(nf::encode(id, v, rounding::m_nearest_even, overflow::m_inf), c) << c;
  }
}
INSTANTIATE_TEST_SUITE_P(
    all, round_trip,
    ::testing::Values(format_id::m_e4m3fn, format_id::m_e4m3fnuz, format_id::m_e5m2,
                      format_id::m_e5m2fnuz, format_id::m_e2m3, format_id::m_e3m2,
                      format_id::m_e2m1, format_id::m_e8m0, format_id::m_i8, format_id::m_i4,
                      format_id::m_u4, format_id::m_f16, format_id::m_bf16),
    [](const auto& info) { return std::string(nf::name(info.param)); });

TEST(encode_rne, e2m1_ties_go_to_even_codes) {
  EXPECT_EQ(rne(format_id::m_e2m1, 2.5), 0x4u);   // 2 (100) vs 3 (101): even is 2
  EXPECT_EQ(rne(format_id::m_e2m1, 3.5), 0x6u);   // 3 (101) vs 4 (110): even is 4
  EXPECT_EQ(rne(format_id::m_e2m1, 5.0), 0x6u);   // 4 (110) vs 6 (111): even is 4
  EXPECT_EQ(rne(format_id::m_e2m1, 0.25), 0x0u);  // 0 vs 0.5 (001): even is 0
  EXPECT_EQ(rne(format_id::m_e2m1, 0.75), 0x2u);  // 0.5 (001) vs 1 (010): even is 1
  EXPECT_EQ(rne(format_id::m_e2m1, -1.25), 0xAu);  // -1 (1010) vs -1.5 (1011): -1
  EXPECT_EQ(rne(format_id::m_e2m1, 0.2500001), 0x1u);  // just above the tie
  EXPECT_EQ(rne(format_id::m_e2m1, 5.0000001), 0x7u);
}

TEST(encode_rne, e4m3fn_overflow_threshold_under_each_policy) {
  // 448 = 1.110b * 2^8; the next step 480 would be 1.111b (NaN). The midpoint 464 is a tie
  // that goes to 448 (even mantissa); anything above rounds to 480, which overflows.
  EXPECT_EQ(rne(format_id::m_e4m3fn, 464.0), 0x7Eu);
  EXPECT_EQ(rne(format_id::m_e4m3fn, 465.0), 0x7Fu);  // default: NaN, as ml_dtypes
  EXPECT_EQ(rne(format_id::m_e4m3fn, 465.0, overflow::m_nan), 0x7Fu);
  EXPECT_EQ(rne(format_id::m_e4m3fn, -465.0, overflow::m_nan), 0xFFu);
  EXPECT_EQ(rne(format_id::m_e4m3fn, 465.0, overflow::m_saturate), 0x7Eu);
  EXPECT_EQ(rne(format_id::m_e4m3fn, -1e30, overflow::m_saturate), 0xFEu);
  EXPECT_EQ(rne(format_id::m_e4m3fn, k_inf, overflow::m_saturate), 0x7Eu);
  EXPECT_EQ(rne(format_id::m_e4m3fn, 465.0, overflow::m_inf), 0x7Fu);  // no inf: NaN
  EXPECT_TRUE(std::isnan(nf::round_to(format_id::m_e4m3fn, 465.0)));
  EXPECT_EQ(nf::round_to(format_id::m_e4m3fn, 464.0), 448.0);
}

TEST(encode_rne, other_overflow_thresholds) {
  // e4m3fnuz: 240 = 1.111b * 2^7, next 256; midpoint 248 ties up (odd) and overflows.
  EXPECT_EQ(rne(format_id::m_e4m3fnuz, 247.99), 0x7Fu);
  EXPECT_EQ(rne(format_id::m_e4m3fnuz, 248.0), 0x80u);
  // e5m2: 57344 = 1.11b * 2^15, next 65536; the tie 61440 goes up (odd) to inf.
  EXPECT_EQ(rne(format_id::m_e5m2, 61439.0), 0x7Bu);
  EXPECT_EQ(rne(format_id::m_e5m2, 61440.0), 0x7Cu);
  EXPECT_EQ(rne(format_id::m_e5m2, -61440.0, overflow::m_saturate), 0xFBu);
  // f16: 65504 = 1.1111111111b * 2^15, tie 65520 goes up to inf.
  EXPECT_EQ(rne(format_id::m_f16, 65519.0), 0x7BFFu);
  EXPECT_EQ(rne(format_id::m_f16, 65520.0), 0x7C00u);
  // fp6/fp4 saturate by default (e3m2 max 28 = 1.75 * 2^4; e2m3 max 7.5).
  EXPECT_EQ(rne(format_id::m_e3m2, 1000.0), 0x1Fu);
  EXPECT_EQ(rne(format_id::m_e2m3, -k_inf), 0x3Fu);
  EXPECT_EQ(rne(format_id::m_e2m1, 7.0), 0x7u);
  // bf16: 256 + 1 = 256 (8 significant bits; 257 is a tie that goes to even 256).
  EXPECT_EQ(nf::round_to(format_id::m_bf16, 257.0), 256.0);
  EXPECT_EQ(nf::round_to(format_id::m_bf16, 259.0), 260.0);  // 258 (odd) vs 260 (even)
}

TEST(encode_rne, subnormal_boundaries) {
  // e4m3fn subnormals are k * 2^-9, k = 1..7; min normal 2^-6 = 8 * 2^-9.
  EXPECT_EQ(rne(format_id::m_e4m3fn, 0x1p-10), 0x00u);        // tie 0 vs 1: even 0
  EXPECT_EQ(rne(format_id::m_e4m3fn, 0x1.0001p-10), 0x01u);   // just above the tie
  EXPECT_EQ(rne(format_id::m_e4m3fn, 1.5 * 0x1p-9), 0x02u);   // tie 1 vs 2: even 2
  EXPECT_EQ(rne(format_id::m_e4m3fn, 7.5 * 0x1p-9), 0x08u);   // tie 7 vs 8 (min normal)
  EXPECT_EQ(rne(format_id::m_e4m3fn, -0x1p-11), 0x80u);       // rounds to -0
  // fnuz has no -0: a negative value that rounds to zero is +0.
  EXPECT_EQ(rne(format_id::m_e4m3fnuz, -0x1p-12), 0x00u);
  EXPECT_EQ(rne(format_id::m_e4m3fnuz, -0.0), 0x00u);
  EXPECT_EQ(rne(format_id::m_e5m2fnuz, -0.0), 0x00u);
  // f16: 2^-25 is the tie between 0 and 2^-24.
  EXPECT_EQ(rne(format_id::m_f16, 0x1p-25), 0x0000u);
  EXPECT_EQ(rne(format_id::m_f16, 0x1.8p-24), 0x0002u);  // 1.5 ulp: tie 1 vs 2
  // bf16 smallest subnormal 2^-133; 2^-134 ties to 0.
  EXPECT_EQ(rne(format_id::m_bf16, 0x1p-134), 0x0000u);
  EXPECT_EQ(rne(format_id::m_bf16, 0x1.000001p-134), 0x0001u);
}

TEST(encode_rne, exact_from_double_no_double_rounding) {
  // 1.0625 + 2^-40 is above the tie between 1 (0x38) and 1.125 (0x39): it must go up. A cast
  // through float32 (as ml_dtypes does) loses the 2^-40 and ties to 0x38.
  EXPECT_EQ(rne(format_id::m_e4m3fn, 1.0625 + 0x1p-40), 0x39u);
  EXPECT_EQ(rne(format_id::m_bf16, 1.0 + 0x1p-8 + 0x1p-30), 0x3F81u);
}

TEST(encode, nan_and_zero_conventions) {
  EXPECT_EQ(rne(format_id::m_e4m3fn, k_nan), 0x7Fu);
  EXPECT_EQ(rne(format_id::m_e4m3fn, -k_nan), 0xFFu);
  EXPECT_EQ(rne(format_id::m_e4m3fnuz, -k_nan), 0x80u);
  EXPECT_EQ(rne(format_id::m_e5m2, k_nan), 0x7Eu);
  EXPECT_EQ(rne(format_id::m_e5m2, -k_nan), 0xFEu);
  EXPECT_EQ(rne(format_id::m_f16, k_nan), 0x7E00u);
  EXPECT_EQ(rne(format_id::m_f32, -k_nan), 0xFFC00000u);
  // fp6/fp4: no NaN; ml_dtypes gives a zero of the opposite sign.
  EXPECT_EQ(rne(format_id::m_e2m1, k_nan), 0x8u);
  EXPECT_EQ(rne(format_id::m_e2m1, -k_nan), 0x0u);
  EXPECT_EQ(rne(format_id::m_e3m2, k_nan), 0x20u);
  EXPECT_EQ(rne(format_id::m_i8, k_nan), 0x00u);
  EXPECT_EQ(rne(format_id::m_e2m1, -0.0), 0x8u);
}

TEST(encode, e8m0_conventions) {
  EXPECT_EQ(rne(format_id::m_e8m0, 1.0), 0x7Fu);
  EXPECT_EQ(rne(format_id::m_e8m0, 1.5), 0x80u);   // tie: significand 1 is odd, goes up
  EXPECT_EQ(rne(format_id::m_e8m0, 3.0), 0x81u);   // tie 2 vs 4: up
  EXPECT_EQ(rne(format_id::m_e8m0, 1.4999), 0x7Fu);
  EXPECT_EQ(rne(format_id::m_e8m0, 0x1p-130), 0x00u);  // below 2^-127: no zero, 2^-127
  EXPECT_EQ(rne(format_id::m_e8m0, 1e-300), 0x00u);
  EXPECT_EQ(rne(format_id::m_e8m0, 0.0), 0xFFu);   // no zero: NaN (ml_dtypes)
  EXPECT_EQ(rne(format_id::m_e8m0, -2.0), 0xFFu);  // no sign: NaN
  EXPECT_EQ(rne(format_id::m_e8m0, 0x1.8p127), 0xFFu);  // rounds to 2^128: overflow
  EXPECT_EQ(rne(format_id::m_e8m0, 0x1.8p127, overflow::m_saturate), 0xFEu);
  EXPECT_EQ(rne(format_id::m_e8m0, k_inf, overflow::m_saturate), 0xFEu);
}

TEST(encode, integers_round_half_even_and_saturate) {
  EXPECT_EQ(rne(format_id::m_i4, 2.5), 2u);
  EXPECT_EQ(rne(format_id::m_i4, 3.5), 4u);
  EXPECT_EQ(rne(format_id::m_i4, -8.7), 0x8u);   // saturates to -8
  EXPECT_EQ(rne(format_id::m_i4, 100.0), 0x7u);  // saturates to 7 (ml_dtypes would wrap)
  EXPECT_EQ(rne(format_id::m_u4, -3.0), 0x0u);
  EXPECT_EQ(rne(format_id::m_i8, -128.4), 0x80u);
  EXPECT_EQ(rne(format_id::m_i8, k_inf), 0x7Fu);
}

}  // namespace
