// The one host encoder of 16-bit kernel buffers (src/providers/host_dtype.hpp): bit for bit
// formats::encode, i.e. one round to nearest even from the double. Each case below fails for a
// known wrong encoder: truncation (ties and values above them), a round through float first
// (double rounding), a NaN that loses its sign or becomes inf, and an overflow that saturates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "src/providers/host_dtype.hpp"

namespace numprobe {
namespace {

using formats::format_id;

TEST(host_dtype, bf16_rounds_to_nearest_even_once) {
  // 1 + 2^-8 is the tie between 1 and 1 + 2^-7: even is 1 (0x3F80).
  EXPECT_EQ(encode16(format_id::m_bf16, 1.0 + 0x1p-8), 0x3F80);
  // 1 + 3 * 2^-8 ties between 0x3F81 and 0x3F82: even is 0x3F82 (truncation gives 0x3F81).
  EXPECT_EQ(encode16(format_id::m_bf16, 1.0 + 3 * 0x1p-8), 0x3F82);
  // Just above the tie rounds up. Through float first, 1 + 2^-8 + 2^-30 becomes the tie
  // 1 + 2^-8 (float keeps 24 bits) and then rounds to even, 0x3F80: double rounding.
  EXPECT_EQ(encode16(format_id::m_bf16, 1.0 + 0x1p-8 + 0x1p-30), 0x3F81);
  EXPECT_EQ(encode16(format_id::m_bf16, -(1.0 + 0x1p-8 + 0x1p-30)), 0xBF81);
  // A carry into the exponent: (2 - 2^-8) is the tie below 2, even is 2.0 (0x4000).
  EXPECT_EQ(encode16(format_id::m_bf16, 2.0 - 0x1p-8), 0x4000);
}

TEST(host_dtype, f16_rounds_to_nearest_even_once) {
  EXPECT_EQ(encode16(format_id::m_f16, 1.0 + 0x1p-11), 0x3C00);            // tie -> even
  EXPECT_EQ(encode16(format_id::m_f16, 1.0 + 3 * 0x1p-11), 0x3C02);        // tie -> even, up
  EXPECT_EQ(encode16(format_id::m_f16, 1.0 + 0x1p-11 + 0x1p-40), 0x3C01);  // above the tie
  EXPECT_EQ(encode16(format_id::m_f16, 0x1p-24), 0x0001);                  // smallest subnormal
  EXPECT_EQ(encode16(format_id::m_f16, 0x1p-25), 0x0000);                  // tie with 0 -> even
}

TEST(host_dtype, nan_keeps_its_sign_and_stays_nan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(encode16(format_id::m_bf16, nan), 0x7FC0);
  EXPECT_EQ(encode16(format_id::m_bf16, -nan), 0xFFC0);
  EXPECT_EQ(encode16(format_id::m_f16, nan), 0x7E00);
  EXPECT_EQ(encode16(format_id::m_f16, -nan), 0xFE00);
  EXPECT_TRUE(std::isnan(decode16(format_id::m_f16, 0x7E00)));
  EXPECT_TRUE(std::isnan(decode16(format_id::m_bf16, 0xFFC0)));
}

TEST(host_dtype, overflow_goes_to_inf) {
  const double inf = std::numeric_limits<double>::infinity();
  // bf16: max 0x1.fep127; the tie above it (0x1.ffp127) rounds to even, which is inf.
  EXPECT_EQ(encode16(format_id::m_bf16, 0x1.fep127), 0x7F7F);
  EXPECT_EQ(encode16(format_id::m_bf16, 0x1.ffp127), 0x7F80);
  EXPECT_EQ(encode16(format_id::m_bf16, 0x1.feffp127), 0x7F7F);
  EXPECT_EQ(encode16(format_id::m_bf16, -1e300), 0xFF80);
  EXPECT_EQ(encode16(format_id::m_bf16, inf), 0x7F80);
  // fp16: max 65504; 65520 is the tie to inf.
  EXPECT_EQ(encode16(format_id::m_f16, 65504.0), 0x7BFF);
  EXPECT_EQ(encode16(format_id::m_f16, 65519.0), 0x7BFF);
  EXPECT_EQ(encode16(format_id::m_f16, 65520.0), 0x7C00);
  EXPECT_EQ(encode16(format_id::m_f16, -inf), 0xFC00);
}

// Every code round-trips, and every midpoint between neighbours, and random doubles, encode as
// formats::encode does.
TEST(host_dtype, equals_the_codec) {
  for (format_id id : {format_id::m_bf16, format_id::m_f16}) {
    for (std::uint32_t c = 0; c < 65536; ++c) {
      const double x = decode16(id, static_cast<std::uint16_t>(c));
      if (std::isnan(x)) continue;
      ASSERT_EQ(encode16(id, x), formats::encode(id, x)) << formats::name(id) << " code " << c;
      const double next = decode16(id, static_cast<std::uint16_t>(c + 1));
      if (c + 1 < 65536 && std::isfinite(x) && std::isfinite(next) && std::signbit(x) == std::signbit(next)) {
        const double mid = x + (next - x) / 2;
        ASSERT_EQ(encode16(id, mid), formats::encode(id, mid)) << formats::name(id) << " mid " << c;
      }
    }
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> mant(1.0, 2.0);
    std::uniform_int_distribution<int> exp2(-140, 130);
    for (int i = 0; i < 200000; ++i) {
      const double x = std::ldexp(mant(rng), exp2(rng)) * ((i & 1) ? -1 : 1);
      ASSERT_EQ(encode16(id, x), formats::encode(id, x)) << formats::name(id) << " " << x;
    }
  }
}

TEST(host_dtype, encode_all_matches_elementwise) {
  std::vector<double> x(1 << 17);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(1.0 + static_cast<double>(i) * 0x1p-17, static_cast<int>(i % 40) - 20);
  std::vector<std::uint16_t> out;
  encode16_all(format_id::m_bf16, x, out);
  ASSERT_EQ(out.size(), x.size());
  for (std::size_t i = 0; i < x.size(); i += 97) EXPECT_EQ(out[i], encode16(format_id::m_bf16, x[i]));
}

}  // namespace
}  // namespace numprobe
