// The RNE bit codec and decode tables (src/formats/fast_codec.cpp) against the reference
// codec (quantum by quantum, the one the ml_dtypes oracle checks), bit for bit, for every
// format of at most 8 bits and every overflow policy. The samples:
// - floats: every pattern of the top 20 bits (sign, exponent, 11 fraction bits) with the low
//   12 bits 0, 1, 0x800 and 0xFFF; every fp8/fp6/fp4/int midpoint has <= 6 significant bits,
//   so each one, and the floats one ulp either side of it, are in the sample;
// - doubles: every midpoint between neighbouring values (and past the max, where overflow is
//   decided), each with the doubles 1 and 2 ulps either side; two million seeded random
//   doubles (all bit patterns, and exponents near the formats' ranges); specials (+-0, +-inf,
//   NaNs of both signs and several payloads, double subnormals, the largest double).
// A single mismatch fails the case and prints the first few inputs in hex.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "src/formats/fast_codec.hpp"

namespace nf = numprobe::formats;
namespace nd = numprobe::formats::detail;
using nf::format_id;
using nf::overflow;
using nf::rounding;

namespace {

constexpr overflow k_policies[] = {overflow::m_saturate, overflow::m_nan, overflow::m_inf,
                                   overflow::m_format_default};

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<double> double_sample(format_id id) {
  const auto& f = nf::info(id);
  std::vector<double> vals;
  const auto codes = 1u << f.storage_bits;
  for (std::uint32_t c = 0; c < codes; ++c) {
    const double v = nd::reference_decode(id, c);
    if (std::isfinite(v)) vals.push_back(std::fabs(v));
  }
  std::sort(vals.begin(), vals.end());
  vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
  std::vector<double> points = vals;
  for (std::size_t i = 0; i + 1 < vals.size(); ++i) points.push_back((vals[i] + vals[i + 1]) / 2);
  // Past the max: the midpoint to the next value of the unbounded-exponent grid.
  const double max = f.max_finite;
  const double ulp = f.is_float ? std::ldexp(1.0, std::ilogb(max) - f.mantissa_bits) : 1.0;
  points.push_back(max + ulp / 2);
  points.push_back(max + ulp);
  points.push_back(max * 4);
  if (f.is_float) {
    const double tiny = f.min_subnormal > 0 ? f.min_subnormal : f.min_normal;
    points.push_back(tiny / 2);
    points.push_back(tiny / 4);
    points.push_back(tiny * 0.75);
  }
  std::vector<double> out;
  constexpr double inf = std::numeric_limits<double>::infinity();
  for (double p : points) {
    double lo = p, hi = p;
    out.push_back(p);
    for (int k = 0; k < 2; ++k) {
      lo = std::nextafter(lo, -inf);
      hi = std::nextafter(hi, inf);
      out.push_back(lo);
      out.push_back(hi);
    }
  }
  std::uint64_t s = 0x5eed0000u + static_cast<std::uint64_t>(id);
  for (int i = 0; i < 1'000'000; ++i) {
    const std::uint64_t b = splitmix(s);
    out.push_back(std::bit_cast<double>(b));
    // Exponents in [-160, 160): the formats' ranges with margin on both sides.
    const int e = static_cast<int>(splitmix(s) % 320) - 160;
    out.push_back(std::ldexp(std::bit_cast<double>((b & ((1ull << 52) - 1)) | (1023ull << 52)), e));
  }
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  for (double x : {0.0, inf, nan, std::numeric_limits<double>::signaling_NaN(),
                   std::bit_cast<double>(0x7FF0000000000001ull),
                   std::bit_cast<double>(0x7FFFFFFFFFFFFFFFull),
                   std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::min() * (1 - 0x1p-52),
                   std::numeric_limits<double>::min(), std::numeric_limits<double>::max()})
    out.push_back(x);
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i) out.push_back(-out[i]);
  return out;
}

std::string hex(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(x)));
  return buf;
}

// Compares encode() and round_to() (RNE) with the reference for one input; records failures.
struct checker {
  format_id id;
  std::int64_t mismatches = 0;
  std::vector<std::string> first;
  void check(double x, overflow o) {
    const auto fast = nf::encode(id, x, rounding::m_nearest_even, o);
    const auto ref = nd::reference_encode(id, x, rounding::m_nearest_even, o, 0);
    const auto fr = std::bit_cast<std::uint64_t>(nf::round_to(id, x, rounding::m_nearest_even, o));
    const auto rr = std::bit_cast<std::uint64_t>(
        nd::reference_round_to(id, x, rounding::m_nearest_even, o, 0));
    if (fast == ref && fr == rr) return;
    ++mismatches;
    if (first.size() < 8)
      first.push_back(hex(x) + " policy " + std::to_string(static_cast<int>(o)) + ": encode " +
                      std::to_string(fast) + " vs " + std::to_string(ref) + ", round_to " +
                      hex(std::bit_cast<double>(fr)) + " vs " + hex(std::bit_cast<double>(rr)));
  }
  void expect_none() const {
    EXPECT_EQ(mismatches, 0);
    for (const auto& s : first) ADD_FAILURE() << s;
  }
};

class fast_codec : public testing::TestWithParam<format_id> {};

TEST_P(fast_codec, covers_the_format) { EXPECT_TRUE(nd::has_rne_bit_codec(GetParam())); }

TEST_P(fast_codec, decode_table_equals_reference_for_every_code) {
  const format_id id = GetParam();
  // Bits above storage_bits are ignored by both: check a few such codes as well.
  for (std::uint32_t c = 0; c < 1024; ++c) {
    const auto fast = std::bit_cast<std::uint64_t>(nf::decode(id, c));
    const auto ref = std::bit_cast<std::uint64_t>(nd::reference_decode(id, c));
    EXPECT_EQ(fast, ref) << "code " << c;
  }
}

TEST_P(fast_codec, rne_encode_equals_reference_on_dense_floats) {
  checker ck{GetParam(), 0, {}};
  for (std::uint32_t top = 0; top < (1u << 20); ++top)
    for (std::uint32_t low : {0u, 1u, 0x800u, 0xFFFu}) {
      const double x = std::bit_cast<float>((top << 12) | low);
      for (auto o : k_policies) ck.check(x, o);
    }
  ck.expect_none();
}

TEST_P(fast_codec, rne_encode_equals_reference_on_doubles) {
  checker ck{GetParam(), 0, {}};
  for (double x : double_sample(GetParam()))
    for (auto o : k_policies) ck.check(x, o);
  ck.expect_none();
}

TEST_P(fast_codec, bulk_encode_equals_reference) {
  const format_id id = GetParam();
  std::vector<float> in;
  std::uint64_t s = 99;
  for (int i = 0; i < 100'000; ++i)
    in.push_back(std::ldexp(static_cast<float>(splitmix(s) >> 40) * 0x1p-24f,
                            static_cast<int>(splitmix(s) % 40) - 20) *
                 (i % 2 ? -1.0f : 1.0f));
  std::vector<std::uint32_t> out(in.size());
  nf::encode_many(id, in, out, {rounding::m_nearest_even, overflow::m_saturate, 0});
  for (std::size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(out[i], nd::reference_encode(id, in[i], rounding::m_nearest_even,
                                           overflow::m_saturate, 0))
        << hex(in[i]);
}

// Other rounding modes still go to the reference.
TEST_P(fast_codec, other_rounding_modes_use_the_reference) {
  const format_id id = GetParam();
  for (double x : {0.3, -1.7, 5.5, 1e-3, 300.0})
    EXPECT_EQ(nf::encode(id, x, rounding::m_toward_zero),
              nd::reference_encode(id, x, rounding::m_toward_zero, overflow::m_format_default, 0));
}

INSTANTIATE_TEST_SUITE_P(
    small_formats, fast_codec,
    testing::Values(format_id::m_e4m3fn, format_id::m_e4m3fnuz, format_id::m_e5m2,
                    format_id::m_e5m2fnuz, format_id::m_e2m3, format_id::m_e3m2,
                    format_id::m_e2m1, format_id::m_e8m0, format_id::m_i8, format_id::m_i4,
                    format_id::m_u4),
    [](const testing::TestParamInfo<format_id>& i) { return std::string(nf::name(i.param)); });

TEST(fast_codec_scope, wider_formats_keep_the_reference) {
  for (auto id : {format_id::m_f32, format_id::m_tf32, format_id::m_bf16, format_id::m_f16,
                  format_id::m_f64})
    EXPECT_FALSE(nd::has_rne_bit_codec(id)) << nf::name(id);
}

}  // namespace
