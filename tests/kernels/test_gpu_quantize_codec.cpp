// The GPU quantize kernels' software encoders (src/kernels/gpu/quantize_codec.cuh: the HIP
// path and the sm<89 path) against the reference codec formats::encode, bit for bit. The codec
// header is plain C++ on the host, so these run in every build, CPU-only CI included; the
// device-side tests of the same kernels are in tests/gpu/test_gpu_quantize.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "numprobe/formats/format.hpp"
#include "src/kernels/gpu/quantize_codec.cuh"

namespace numprobe::gpu::testing {
namespace {

using formats::format_id;
namespace cd = numprobe::gpu::codec;

float random_float(std::mt19937_64& g) {
  // Wide magnitudes, both signs, dyadic values (ties) one time in four.
  std::uniform_int_distribution<int> pick(0, 3);
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_int_distribution<int> e(-20, 12), k(-64, 64);
  switch (pick(g)) {
    case 0: return std::ldexp(static_cast<float>(k(g)) / 8.f, e(g) / 4);
    case 1: return std::ldexp(n(g), e(g));
    default: return n(g) * 100.f;
  }
}

TEST(gpu_quantize_codec, round_odd_then_e4m3_equals_exact_rounding) {
  std::mt19937_64 g(11);
  for (int i = 0; i < 400000; ++i) {
    const float v = random_float(g);
    float s = std::fabs(random_float(g));
    if (s == 0.f) s = 1.f;
    const double t = static_cast<double>(v) / static_cast<double>(s);
    const auto ref = formats::encode(format_id::m_e4m3fn, t, formats::rounding::m_nearest_even,
                                     formats::overflow::m_saturate);
    ASSERT_EQ(cd::encode_e4m3_sw(cd::div_round_odd(v, s)), ref) << "v=" << v << " s=" << s;
    const auto ref2 = formats::encode(format_id::m_e2m1, t, formats::rounding::m_nearest_even,
                                      formats::overflow::m_saturate);
    ASSERT_EQ(cd::encode_e2m1_sw(cd::div_round_odd(v, s)), ref2) << "v=" << v << " s=" << s;
    ASSERT_EQ(cd::encode_i4(cd::div_round_odd(v, s)), formats::encode(format_id::m_i4, t))
        << "v=" << v << " s=" << s;
  }
}

TEST(gpu_quantize_codec, e2m1_decision_points_equal_exact_division) {
  std::mt19937_64 g(12);
  std::uniform_int_distribution<int> sbc(1, 0x7E);
  for (int i = 0; i < 200000; ++i) {
    const float sb = cd::decode_e4m3(static_cast<std::uint32_t>(sbc(g)));
    const float st = std::fabs(random_float(g)) + 1e-20f;
    const double P = static_cast<double>(sb) * st;
    float v = random_float(g);
    if (i % 3 == 0) {  // an exact tie or neighbour of one
      const double mids[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
      v = static_cast<float>(mids[i % 7] * P);
    }
    const auto pts = cd::make_e2m1_points(sb, st);
    const auto ref = formats::encode(format_id::m_e2m1, static_cast<double>(v) / P,
                                     formats::rounding::m_nearest_even,
                                     formats::overflow::m_saturate);
    ASSERT_EQ(cd::encode_e2m1_points(v, pts), ref) << "v=" << v << " sb=" << sb << " st=" << st;
  }
}

TEST(gpu_quantize_codec, reciprocal_round_odd_equals_division_round_odd) {
  std::mt19937_64 g(14);
  std::uniform_int_distribution<int> e(-130, 125);
  for (int i = 0; i < 2000000; ++i) {
    const float v = i % 5 == 0 ? std::ldexp(random_float(g), e(g)) : random_float(g);
    float s = std::fabs(random_float(g));
    if (i % 7 == 0) s = std::ldexp(s, e(g) / 2);
    if (!(s > 0.f) || std::isinf(s)) s = 1.f;
    const float rs = cd::block_reciprocal(s);
    const float a = cd::div_round_odd_rcp(v, s, rs), b = cd::div_round_odd(v, s);
    ASSERT_EQ(cd::f2u(a), cd::f2u(b)) << "v=" << v << " s=" << s;
  }
}

// The multiply-then-check e4m3 path of the kernels (e4m3_quotient) against the exact RNE code
// of v / s, on random pairs and on quotients placed at, and 1..12 fp32 steps around, every kind
// of e4m3 decision point (normal midpoints, subnormal midpoints, the 2^-10 tie, 448..464).
TEST(gpu_quantize_codec, e4m3_reciprocal_path_equals_exact_rounding) {
  std::mt19937_64 g(16);
  std::uniform_int_distribution<int> code(0, 0x7D), step(-12, 12), e(-40, 40);
  for (int i = 0; i < 3000000; ++i) {
    float s = std::fabs(random_float(g));
    if (i % 5 == 0) s = std::ldexp(s, e(g));
    if (!(s > 0.f) || std::isinf(s)) s = 1.f;
    float v = random_float(g);
    if (i % 2 == 0) {
      // x near a decision point: the midpoint above code c (c = 0x7D..: 432, and 464 above 448).
      const double lo = formats::decode(format_id::m_e4m3fn, static_cast<std::uint32_t>(code(g)));
      const double hi = formats::decode(format_id::m_e4m3fn, static_cast<std::uint32_t>(code(g) + 1));
      const double mid = i % 10 == 0 ? 0x1.0p-10 : i % 10 == 2 ? 464.0 : 0.5 * (lo + hi);
      v = static_cast<float>(mid * s);
      const int k = step(g);
      v = cd::u2f(cd::f2u(v) + static_cast<std::uint32_t>(k));
      if (i % 4 == 0) v = -v;
    }
    const double t = static_cast<double>(v) / static_cast<double>(s);
    const auto ref = formats::encode(format_id::m_e4m3fn, t, formats::rounding::m_nearest_even,
                                     formats::overflow::m_saturate);
    const float q = cd::e4m3_quotient(v, s, cd::block_reciprocal(s));
    ASSERT_EQ(cd::encode_e4m3_sw(q), ref) << "v=" << v << " s=" << s;
  }
}

// The fp32-only NVFP4/MX thresholds equal the double-built ones wherever the kernels use them.
TEST(gpu_quantize_codec, e2m1_thresholds_f32_equal_double) {
  std::mt19937_64 g(17);
  std::uniform_int_distribution<int> sbc(1, 0x7E), x(-30, 30), e(-88, 88);
  for (int i = 0; i < 1000000; ++i) {
    const bool mx = i % 4 == 0;
    const float sb = mx ? static_cast<float>(std::ldexp(1.0, x(g)))
                        : cd::decode_e4m3(static_cast<std::uint32_t>(sbc(g)));
    float st = mx ? 1.f : std::ldexp(std::fabs(random_float(g)) + 1e-3f, e(g));
    if (!cd::e2m1_thresholds_f32_ok(st)) st = 1.f;
    const auto a = cd::make_e2m1_thresholds_f32(sb, st);
    const auto b = cd::make_e2m1_thresholds(sb, st);
    for (int k = 0; k < 7; ++k)
      ASSERT_EQ(cd::f2u(a.thr[k]), cd::f2u(b.thr[k])) << "k=" << k << " sb=" << sb << " st=" << st;
  }
}

TEST(gpu_quantize_codec, e2m1_thresholds_equal_points) {
  std::mt19937_64 g(15);
  std::uniform_int_distribution<int> sbc(1, 0x7E), x(-127, 125);
  for (int i = 0; i < 200000; ++i) {
    const bool mx = i % 2 == 0;
    const float sb = mx ? static_cast<float>(std::ldexp(1.0, x(g))) : cd::decode_e4m3(static_cast<std::uint32_t>(sbc(g)));
    const float st = mx ? 1.f : std::fabs(random_float(g)) + 1e-20f;
    const double P = static_cast<double>(sb) * st;
    float v = mx ? std::ldexp(random_float(g), x(g) / 4) * sb : random_float(g);
    if (i % 3 == 0) {
      const double mids[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
      v = static_cast<float>(mids[i % 7] * P);
      if (i % 9 == 0) v = cd::u2f(cd::f2u(v) + 1);
      if (i % 9 == 3) v = cd::u2f(cd::f2u(v) - 1);
    }
    const auto t = cd::make_e2m1_thresholds(sb, st);
    const auto ref = formats::encode(format_id::m_e2m1, static_cast<double>(v) / P,
                                     formats::rounding::m_nearest_even,
                                     formats::overflow::m_saturate);
    ASSERT_EQ(cd::encode_e2m1_thresholds(v, t), ref) << "v=" << v << " sb=" << sb << " st=" << st;
  }
}

TEST(gpu_quantize_codec, scale_stores_match_reference_rounding) {
  std::mt19937_64 g(13);
  for (int i = 0; i < 200000; ++i) {
    const double d = std::fabs(static_cast<double>(random_float(g))) / 448.0 + 1e-30;
    EXPECT_EQ(cd::store_scale(cd::scale_fmt::m_f16, d).code,
              formats::encode(format_id::m_f16, d, formats::rounding::m_nearest_even,
                              formats::overflow::m_saturate));
    EXPECT_EQ(cd::store_scale(cd::scale_fmt::m_e4m3, d).code,
              formats::encode(format_id::m_e4m3fn, d, formats::rounding::m_nearest_even,
                              formats::overflow::m_saturate));
    EXPECT_EQ(cd::store_scale(cd::scale_fmt::m_f32, d).code,
              formats::encode(format_id::m_f32, d));
  }
}

}  // namespace
}  // namespace numprobe::gpu::testing
