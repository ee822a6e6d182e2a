// The GPU quantize kernels' convention arithmetic (src/kernels/gpu/quantize_conventions.cuh)
// against the reference formats::quantize under every combination of the NVFP4 axes and every
// MX rule, bit for bit. The header is plain C++ on the host, so this runs in CPU-only CI; the
// kernels that call it are checked on the device in tests/gpu/test_gpu_quantize.cpp.
//
// The host model below performs, per block, exactly the calls quantize_block_coder.cuh's
// make_coder makes for NVFP4 under non-default conventions (block scale, thresholds, element
// codes). Inputs: seeded normal values, values spanning 2^-40..2^20 (block scales in the e4m3
// subnormal range and past 448), and tie-adversarial blocks (elements on E2M1 midpoints times
// an exact block scale, which a division and a reciprocal multiply round apart).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "numprobe/formats/conventions.hpp"
#include "numprobe/formats/scheme.hpp"
#include "src/kernels/gpu/quantize_conventions.cuh"

namespace numprobe::gpu::testing {
namespace {

namespace cd = numprobe::gpu::codec;
using formats::scale_arith;
using formats::scale_division;
using formats::scale_floor;

constexpr std::int64_t k_rows = 48, k_cols = 16 * 24;

std::vector<double> make_input(int kind, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  std::uniform_int_distribution<int> e(-40, 20), pick(0, 6), sbm(0, 7), sbe(-12, 6), sign(0, 1);
  std::vector<double> x(static_cast<std::size_t>(k_rows * k_cols));
  if (kind == 0) {
    for (auto& v : x) v = static_cast<float>(n(g));
  } else if (kind == 1) {
    // Each block its own magnitude, so block scales cross e4m3's subnormal boundary.
    for (std::int64_t b = 0; b < k_rows * k_cols / 16; ++b) {
      const int eb = e(g);
      for (int j = 0; j < 16; ++j) x[b * 16 + j] = static_cast<float>(std::ldexp(n(g), eb));
    }
  } else {
    // s_t = 13/16 (tensor amax 6 * 448 * 13/16); each block's amax 6 s with s = e4m3-like
    // times s_t, the rest E2M1 midpoints times s.
    const double st = 13.0 / 16.0, mids[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
    for (std::int64_t b = 0; b < k_rows * k_cols / 16; ++b) {
      const double s = (1.0 + sbm(g) / 8.0) * std::ldexp(1.0, sbe(g)) * st;
      for (int j = 0; j < 16; ++j) x[b * 16 + j] = mids[pick(g)] * s * (sign(g) ? -1.0 : 1.0);
      x[b * 16 + static_cast<std::size_t>(pick(g))] = 6.0 * s;
    }
    x[0] = 6.0 * 448.0 * st;
  }
  return x;
}

// make_coder's NVFP4 branch under conventions, then encode4's element coding.
void host_nvfp4(const cd::nvfp4_conventions& c, const std::vector<double>& x, float st,
                std::vector<std::uint32_t>& codes, std::vector<std::uint32_t>& scales) {
  const std::int64_t nb = k_rows * k_cols / 16;
  codes.assign(x.size(), 0);
  scales.assign(static_cast<std::size_t>(nb), 0);
  for (std::int64_t b = 0; b < nb; ++b) {
    float amax = 0.f;
    for (int j = 0; j < 16; ++j) amax = std::fmax(amax, std::fabs(static_cast<float>(x[b * 16 + j])));
    const cd::scale_value v = cd::nvfp4_block_scale(c, amax, st);
    scales[b] = v.code;
    if (v.value == 0.f) continue;
    const cd::e2m1_thresholds t = cd::nvfp4_thresholds(c.division, v.value, st);
    for (int j = 0; j < 16; ++j)
      codes[b * 16 + j] = cd::encode_e2m1_thresholds(static_cast<float>(x[b * 16 + j]), t);
  }
}

TEST(gpu_quantize_conventions, nvfp4_every_axis_combination_matches_the_reference) {
  auto base = formats::find_scheme("nvfp4").defaults;
  int combos = 0;
  std::int64_t differ_from_definition = 0;
  for (auto d : {scale_division::m_exact, scale_division::m_reciprocal, scale_division::m_reciprocal_approx})
    for (auto f : {scale_floor::m_subnormal, scale_floor::m_min_normal})
      for (auto a : {scale_arith::m_double, scale_arith::m_fp32}) {
        auto c = base;
        c.conv = {d, f, a};
        const cd::nvfp4_conventions k{static_cast<int>(d), f == scale_floor::m_min_normal,
                                      a == scale_arith::m_fp32};
        ++combos;
        for (int kind = 0; kind < 3; ++kind) {
          const auto x = make_input(kind, 100 + kind);
          const auto ref = formats::quantize(c, x, k_rows, k_cols);
          const auto def = formats::quantize(base, x, k_rows, k_cols);
          std::vector<std::uint32_t> codes, scales;
          host_nvfp4(k, x, static_cast<float>(ref.tensor_scale), codes, scales);
          std::int64_t bad = 0;
          for (std::size_t i = 0; i < codes.size(); ++i) {
            bad += codes[i] != ref.codes[i];
            differ_from_definition += ref.codes[i] != def.codes[i];
          }
          for (std::size_t b = 0; b < scales.size(); ++b) bad += scales[b] != ref.blocks[b].scale_code;
          EXPECT_EQ(bad, 0) << formats::conventions_text(c) << " input " << kind;
        }
      }
  EXPECT_EQ(combos, 12);
  // The inputs separate the conventions, or the comparison above would be blind.
  EXPECT_GT(differ_from_definition, 1000);
}

// The reciprocal thresholds against a direct fp32 multiply and RNE e2m1 of the product, on
// random multipliers and on magnitudes at, next to and between the thresholds.
TEST(gpu_quantize_conventions, reciprocal_thresholds_equal_multiply_then_round) {
  std::mt19937_64 g(5);
  std::uniform_real_distribution<float> m(1.0f, 2.0f);
  std::uniform_int_distribution<int> e(-60, 60);
  for (int i = 0; i < 20000; ++i) {
    const float r = std::ldexp(m(g), e(g));
    const auto t = cd::make_e2m1_thresholds_reciprocal(r);
    for (int k = 0; k < 7; ++k)
      for (int step = -2; step <= 2; ++step) {
        float v = t.thr[k];
        for (int s = 0; s < std::abs(step); ++s) v = std::nextafter(v, step < 0 ? 0.0f : 1e38f);
        const float p = v * r;
        const auto want = formats::encode(formats::format_id::m_e2m1, p,
                                          formats::rounding::m_nearest_even, formats::overflow::m_saturate);
        ASSERT_EQ(cd::encode_e2m1_thresholds(v, t), want) << "r=" << r << " v=" << v;
        ASSERT_EQ(cd::encode_e2m1_thresholds(-v, t), want | 8u) << "r=" << r << " v=" << -v;
      }
  }
}

// Every MX rule's shared exponent against the reference's scale codes, on amax values at and
// next to each rule's decision points (powers of two, the `even` carry point, sqrt(2) 2^n).
TEST(gpu_quantize_conventions, mx_rules_match_the_reference) {
  for (const char* scheme : {"mxfp4", "mxfp8"}) {
    const auto base = formats::find_scheme(scheme).defaults;
    const bool fp8 = std::string(scheme) == "mxfp8";
    const double elem_max = fp8 ? 448.0 : 6.0;
    const int emax = fp8 ? 8 : 2, mbits = fp8 ? 3 : 1;
    std::vector<double> amax;
    std::mt19937_64 g(9);
    std::normal_distribution<double> n(0.0, 1.0);
    for (int ex = -130; ex <= 120; ex += 3) {
      for (double m : {1.0, std::sqrt(2.0), 2.0 - std::ldexp(1.0, -(mbits + 1)), 1.5, 1.75, 1.875}) {
        const float a = static_cast<float>(std::ldexp(m, ex));
        for (float v : {std::nextafter(a, 0.f), a, std::nextafter(a, 1e38f)})
          if (v > 0.f && std::isfinite(v)) amax.push_back(v);
      }
      amax.push_back(static_cast<float>(std::ldexp(std::fabs(n(g)) + 0.01, ex)));
    }
    // One block of 32 per amax: the amax itself and smaller values.
    std::vector<double> x(amax.size() * 32);
    for (std::size_t b = 0; b < amax.size(); ++b)
      for (int j = 0; j < 32; ++j) x[b * 32 + j] = j == 0 ? amax[b] : amax[b] * 0.25;
    for (auto rule : {formats::mx_rule::m_floor, formats::mx_rule::m_ceil, formats::mx_rule::m_rceil,
                      formats::mx_rule::m_even, formats::mx_rule::m_nearest}) {
      auto c = base;
      c.rule = rule;
      const auto ref = formats::quantize(c, x, static_cast<std::int64_t>(amax.size()), 32);
      for (std::size_t b = 0; b < amax.size(); ++b) {
        int xe = cd::mx_exponent_rule(static_cast<int>(rule), amax[b], elem_max, emax, mbits);
        xe = xe < -127 ? -127 : (xe > 127 ? 127 : xe);
        ASSERT_EQ(static_cast<std::uint32_t>(xe + 127), ref.blocks[b].scale_code)
            << scheme << " rule " << formats::name(rule) << " amax " << amax[b];
      }
    }
  }
}

}  // namespace
}  // namespace numprobe::gpu::testing
