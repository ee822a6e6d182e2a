// round_float_to's fast float paths (bf16, tf32 and f16 bit arithmetic) against round_to, the
// exact double path, for seeded random fp32 bit patterns (every binade, subnormals, inf, NaN),
// constructed ties and the neighbourhood of each format's overflow threshold.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "numprobe/formats/format.hpp"

namespace nf = numprobe::formats;
using nf::format_id;

namespace {

std::vector<float> inputs(format_id id, int drop_bits) {
  std::mt19937_64 gen(20240601);
  std::vector<float> xs;
  for (int i = 0; i < 400000; ++i) xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(gen())));
  // Ties: fp32 patterns whose dropped bits are exactly one half (for bf16/tf32 the dropped
  // bits are the low `drop_bits`; for f16 normals, the low 13).
  for (int i = 0; i < 100000; ++i) {
    auto u = static_cast<std::uint32_t>(gen());
    u = (u & ~((1u << drop_bits) - 1u)) | (1u << (drop_bits - 1));
    xs.push_back(std::bit_cast<float>(u));
  }
  // Around the overflow threshold: the largest finite value and the fp32 values above it.
  const double mx = nf::info(id).max_finite;
  float f = static_cast<float>(mx);
  for (int i = 0; i < 5000 && std::isfinite(f); ++i) {
    xs.push_back(f);
    xs.push_back(-f);
    f = std::nextafter(f, INFINITY);
  }
  // f16 subnormal range, every fp32 multiple of 2^-30 up to 2^-14.
  if (id == format_id::m_f16)
    for (int k = 0; k < (1 << 16); ++k) xs.push_back(static_cast<float>(std::ldexp(k, -30)));
  return xs;
}

void expect_same(format_id id, int drop_bits) {
  int bad = 0;
  for (float x : inputs(id, drop_bits)) {
    const float fast = nf::round_float_to(id, x);
    const auto slow = static_cast<float>(nf::round_to(id, static_cast<double>(x)));
    const bool same = (std::isnan(fast) && std::isnan(slow)) ||
                      std::bit_cast<std::uint32_t>(fast) == std::bit_cast<std::uint32_t>(slow);
    if (!same && ++bad <= 5)
      ADD_FAILURE() << std::hexfloat << x << ": fast " << fast << " exact " << slow;
  }
  EXPECT_EQ(bad, 0);
}

TEST(round_float_to, bf16_equals_round_to) { expect_same(format_id::m_bf16, 16); }
TEST(round_float_to, tf32_equals_round_to) { expect_same(format_id::m_tf32, 13); }
TEST(round_float_to, f16_equals_round_to) { expect_same(format_id::m_f16, 13); }

TEST(round_float_to, hand_derived_points) {
  EXPECT_EQ(nf::round_float_to(format_id::m_bf16, 257.0f), 256.0f);  // tie to even
  EXPECT_EQ(nf::round_float_to(format_id::m_f16, 65520.0f), INFINITY);  // tie up to 2^16
  EXPECT_EQ(nf::round_float_to(format_id::m_f16, 65519.0f), 65504.0f);
  EXPECT_EQ(nf::round_float_to(format_id::m_f16, 0x1p-25f), 0.0f);  // tie 0 vs 2^-24
  EXPECT_EQ(nf::round_float_to(format_id::m_tf32, 1.0f + 0x1p-11f), 1.0f);  // tie to even
  EXPECT_EQ(nf::round_float_to(format_id::m_tf32, 1.0f + 0x3p-11f), 1.0f + 0x1p-9f);
  // A signalling NaN comes back as a quiet NaN, never as the inf its high bits spell.
  const float snan = std::bit_cast<float>(0x7F800001u);
  EXPECT_TRUE(std::isnan(nf::round_float_to(format_id::m_bf16, snan)));
}

}  // namespace
