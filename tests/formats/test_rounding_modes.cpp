// Toward-zero and stochastic rounding. Stochastic bounds are binomial: over N seeded draws the
// count of round-ups of a value with discarded fraction p is Bin(N, p); we allow 6 standard
// deviations, sqrt(N p (1-p)), so a correct implementation fails with probability < 2e-9 and
// the seeds make every run identical anyway.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "numprobe/formats/format.hpp"

namespace nf = numprobe::formats;
using nf::format_id;
using nf::overflow;
using nf::rounding;

namespace {

double rtz(format_id f, double x, overflow o = overflow::m_format_default) {
  return nf::round_to(f, x, rounding::m_toward_zero, o);
}

TEST(toward_zero, truncates_magnitude) {
  EXPECT_EQ(rtz(format_id::m_e4m3fn, 1.99), 1.875);  // 1.111b is the largest below 2
  EXPECT_EQ(rtz(format_id::m_e4m3fn, -1.99), -1.875);
  EXPECT_EQ(rtz(format_id::m_e2m1, 5.9), 4.0);
  EXPECT_EQ(rtz(format_id::m_e2m1, 0.49), 0.0);
  EXPECT_EQ(rtz(format_id::m_bf16, 1.0 + 0x1.fp-8), 1.0);  // below the next bf16, 1 + 2^-7
  EXPECT_EQ(rtz(format_id::m_f16, 0x1.fp-25), 0.0);        // below the smallest subnormal
  EXPECT_EQ(rtz(format_id::m_e8m0, 3.9), 2.0);
  EXPECT_EQ(rtz(format_id::m_e8m0, 0x1p-140), 0x1p-127);  // no zero
}

TEST(toward_zero, overflow) {
  // f16: 70000 truncates to 69984 (quantum 32 in [2^16, 2^17)), beyond 65504. IEEE 754 7.4
  // carries a toward-zero overflow to the largest finite value, not inf.
  EXPECT_EQ(rtz(format_id::m_f16, 70000.0), 65504.0);
  EXPECT_EQ(rtz(format_id::m_f16, std::numeric_limits<double>::infinity()),
            std::numeric_limits<double>::infinity());
  // e4m3fn: 500 truncates to 480 > 448; the NaN policy gives NaN, saturate 448.
  EXPECT_TRUE(std::isnan(rtz(format_id::m_e4m3fn, 500.0)));
  EXPECT_EQ(rtz(format_id::m_e4m3fn, 500.0, overflow::m_saturate), 448.0);
  EXPECT_EQ(rtz(format_id::m_e4m3fn, 479.0), 448.0);  // truncates to 448: no overflow
}

struct sr_case {
  const char* name;
  format_id f;
  double x, lo, hi;  // x lies strictly between adjacent grid values lo < hi (magnitudes)
};

// p = (|x| - lo) / (hi - lo), all dyadic so p is exact.
const sr_case k_sr_cases[] = {
    {"e2m1_p_half", format_id::m_e2m1, 1.25, 1.0, 1.5},
    {"e2m1_p_3_16", format_id::m_e2m1, 1.09375, 1.0, 1.5},
    {"e2m1_negative", format_id::m_e2m1, -4.5, 4.0, 6.0},
    {"e4m3fn_subnormal", format_id::m_e4m3fn, 0.25 * 0x1p-9, 0.0, 0x1p-9},
    {"bf16_quarter", format_id::m_bf16, 1.0 + 0x1p-9, 1.0, 1.0 + 0x1p-7},
    {"f16_tiny_p", format_id::m_f16, 1.0 + 0x1p-16, 1.0, 1.0 + 0x1p-10},
    {"e8m0_between_powers", format_id::m_e8m0, 1.75, 1.0, 2.0},
};

class stochastic : public ::testing::TestWithParam<sr_case> {};

TEST_P(stochastic, unbiased_within_binomial_bound) {
  const auto& c = GetParam();
  const double p = (std::fabs(c.x) - c.lo) / (c.hi - c.lo);
  const int n = 200000;
  std::int64_t ups = 0;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double v = nf::round_to(c.f, c.x, rounding::m_stochastic, overflow::m_saturate,
                                  nf::stochastic_bits(12345, static_cast<std::uint64_t>(i)));
    const double a = std::fabs(v);
    ASSERT_TRUE(a == c.lo || a == c.hi) << v;  // always one of the two neighbours
    ASSERT_EQ(std::signbit(v), std::signbit(c.x) && a != 0.0);
    ups += a == c.hi;
    sum += a;
  }
  const double sigma = std::sqrt(n * p * (1 - p));
  EXPECT_LE(std::fabs(static_cast<double>(ups) - n * p), 6 * sigma) << "p=" << p;
  // The mean magnitude is lo + (hi-lo) ups/n, so the same bound scaled by (hi-lo)/n.
  EXPECT_LE(std::fabs(sum / n - std::fabs(c.x)), 6 * sigma * (c.hi - c.lo) / n);
}

INSTANTIATE_TEST_SUITE_P(cases, stochastic, ::testing::ValuesIn(k_sr_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(stochastic, grid_values_never_move) {
  for (std::uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(nf::round_to(format_id::m_e4m3fn, 448.0, rounding::m_stochastic,
                           overflow::m_nan, nf::stochastic_bits(7, i)), 448.0);
    EXPECT_EQ(nf::round_to(format_id::m_e2m1, -3.0, rounding::m_stochastic,
                           overflow::m_saturate, nf::stochastic_bits(7, i)), -3.0);
  }
}

TEST(stochastic, extreme_random_bits_pick_each_neighbour) {
  // Up iff the top s random bits are below the discarded part: all-zero bits always round
  // up a non-grid value, all-one bits never do.
  EXPECT_EQ(nf::round_to(format_id::m_e2m1, 1.01, rounding::m_stochastic, overflow::m_saturate,
                         0), 1.5);
  EXPECT_EQ(nf::round_to(format_id::m_e2m1, 1.49, rounding::m_stochastic, overflow::m_saturate,
                         ~std::uint64_t{0}), 1.0);
}

TEST(stochastic, bulk_encode_is_reproducible_per_element) {
  std::mt19937_64 gen(99);
  std::uniform_real_distribution<double> dist(-6.0, 6.0);
  std::vector<double> x(4096);
  for (auto& v : x) v = dist(gen);
  std::vector<std::uint32_t> a(x.size()), b(x.size());
  const nf::codec_options opt{rounding::m_stochastic, overflow::m_saturate, 42};
  nf::encode_many(format_id::m_e2m1, std::span<const double>(x), a, opt);
  nf::encode_many(format_id::m_e2m1, std::span<const double>(x), b, opt);
  EXPECT_EQ(a, b);
  // Element i alone, from (seed, i), gives the same code: any element can be regenerated.
  for (std::size_t i = 0; i < x.size(); i += 97)
    EXPECT_EQ(a[i], nf::encode(format_id::m_e2m1, x[i], rounding::m_stochastic,
                               overflow::m_saturate, nf::stochastic_bits(42, i)));
  // A different seed changes some codes (x has non-grid values with p in (0,1)).
  std::vector<std::uint32_t> c(x.size());
  nf::encode_many(format_id::m_e2m1, std::span<const double>(x), c,
                  {rounding::m_stochastic, overflow::m_saturate, 43});
  EXPECT_NE(a, c);
}

}  // namespace
