// GPU quantize kernels vs the reference codec (numprobe::formats::quantize), bit for bit:
// element codes, block scale codes, zero points and the NVFP4 tensor scale, over seeded random
// tensors that include exact ties, outliers, zeros of both signs, subnormal-scale blocks and
// (one family) NaN/inf. Device outputs are poisoned (0xFF) before each launch.
//
// The host-codec tests at the top run everywhere: they check the kernels' software encoders
// (quantize_codec.cuh, the HIP path and the sm<89 path) against formats::encode directly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "numprobe/core/error.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/formats/scheme.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/quantize_codec.cuh"
#include "src/providers/quant_provider.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace numprobe::gpu::testing {
namespace {

using formats::format_id;
namespace cd = numprobe::gpu::codec;

// ------------------------------------------------------------------ host codec (no device)
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

// ------------------------------------------------------------------ device vs reference
enum class family { m_mixed, m_ties, m_tiny_blocks, m_specials };

const char* family_name(family f) {
  switch (f) {
    case family::m_ties: return "ties";
    case family::m_tiny_blocks: return "tiny_blocks";
    case family::m_specials: return "specials";
    default: return "mixed";
  }
}

// Seeded tensor: N(0,1) with 1% outliers x 60, exact zeros and -0, dyadic values (exact ties
// for power-of-two scales), a run of tiny rows (subnormal e4m3 block scales under NVFP4, tiny
// fp8 scales), and in `specials` NaN/+-inf.
std::vector<float> make_tensor(std::int64_t rows, std::int64_t cols, std::uint64_t seed, family f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::uniform_int_distribution<int> k(-48, 48);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      float v = n(g);
      const float p = u(g);
      if (p < 0.01f) v *= 60.f;
      else if (p < 0.02f) v = 0.f;
      else if (p < 0.025f) v = -0.f;
      if (f == family::m_ties) v = static_cast<float>(k(g)) * 0.125f;  // dyadic: ties everywhere
      if (f == family::m_tiny_blocks && r % 3 == 1) v *= 1e-6f;         // NVFP4 subnormal block scales
      if (f == family::m_tiny_blocks && r % 7 == 2) v *= 1e-39f;        // fp32 subnormal inputs
      if (f == family::m_specials) {
        if (p > 0.995f) v = std::numeric_limits<float>::quiet_NaN();
        else if (p > 0.99f) v = (p > 0.9925f ? 1.f : -1.f) * std::numeric_limits<float>::infinity();
        else if (p > 0.985f) v = -std::numeric_limits<float>::quiet_NaN();
      }
      x[static_cast<std::size_t>(r * cols + c)] = v;
    }
  }
  return x;
}

struct qcase {
  std::string scheme;
  std::int64_t rows, cols;
  family fam;
  std::uint64_t seed;
};

std::string qname(const ::testing::TestParamInfo<qcase>& i) {
  return sanitize(i.param.scheme + "_" + std::to_string(i.param.rows) + "x" +
                  std::to_string(i.param.cols) + "_" + family_name(i.param.fam) + "_s" +
                  std::to_string(i.param.seed));
}

class gpu_quantize : public ::testing::TestWithParam<qcase> {};

TEST_P(gpu_quantize, bit_exact_with_reference_codec) {
  NUMPROBE_REQUIRE_GPU();
  const qcase& q = GetParam();
  const formats::scheme_config cfg = formats::find_scheme(q.scheme).defaults;
  const std::vector<float> x = make_tensor(q.rows, q.cols, q.seed, q.fam);
  const std::vector<double> xd(x.begin(), x.end());
  const formats::quant_result ref = formats::quantize(cfg, xd, q.rows, q.cols);
  auto prov = make_quant_provider("cuda");
  ASSERT_EQ(prov->unsupported(cfg), "");
  const quant_device_output dev = prov->quantize(cfg, x, q.rows, q.cols);
  const quant_bit_check chk = compare_quant(ref, dev, xd, 10);
  std::string listing;
  for (const auto& m : chk.listed)
    listing += "  " + m.what + " #" + std::to_string(m.index) + " input=" + std::to_string(m.input) +
               " device=0x" + fmt::format("{:x}", m.device_code) + " reference=0x" +
               fmt::format("{:x}", m.reference_code) + "\n";
  EXPECT_TRUE(chk.exact()) << dev.conversion << "\n elements " << chk.element_mismatches
                           << ", scales " << chk.scale_mismatches << ", zero points "
                           << chk.zero_point_mismatches << ", tensor scale "
                           << (chk.tensor_scale_match ? "ok" : "differs") << "\n" << listing;
  std::printf("[quant-exact] %s %lldx%lld %s: %lld elements, %lld blocks, mismatches %lld/%lld, %s\n",
              q.scheme.c_str(), static_cast<long long>(q.rows), static_cast<long long>(q.cols),
              family_name(q.fam), static_cast<long long>(chk.elements),
              static_cast<long long>(chk.blocks),
              static_cast<long long>(chk.element_mismatches),
              static_cast<long long>(chk.scale_mismatches), dev.conversion.c_str());
}

std::vector<qcase> quant_cases() {
  std::vector<qcase> out;
  const char* schemes[] = {"fp8-tensor", "fp8-act1x128", "fp8-act1x128-ue8m0", "fp8-block128",
                           "mxfp4",      "mxfp8",        "nvfp4",              "int4-g128",
                           "int4-awq"};
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{256, 512}, {131, 301}};
  std::uint64_t seed = 1;
  for (const char* s : schemes)
    for (auto [r, c] : shapes)
      for (family f : {family::m_mixed, family::m_ties, family::m_tiny_blocks, family::m_specials})
        out.push_back({s, r, c, f, seed++});
  return out;
}
INSTANTIATE_TEST_SUITE_P(schemes, gpu_quantize, ::testing::ValuesIn(quant_cases()), qname);

// The software e4m3 path on the device (the HIP path and sm < 89) equals the hardware path.
TEST(gpu_quantize_paths, software_e4m3_equals_cvt) {
  NUMPROBE_REQUIRE_GPU();
  const std::int64_t rows = 64, cols = 1024;
  const std::vector<float> x = make_tensor(rows, cols, 99, family::m_specials);
  quant_request r;
  r.kind = quant_kind::m_row_block;
  r.elem = quant_elem::m_e4m3;
  r.scale = quant_scale::m_f32;
  r.rows = rows;
  r.cols = cols;
  r.block_cols = 128;
  r.x = x.data();
  const quant_device_result hw = cuda_quant_api().quantize(r);
  r.hw_cvt = false;
  const quant_device_result sw = cuda_quant_api().quantize(r);
  EXPECT_EQ(hw.codes, sw.codes);
  EXPECT_EQ(hw.scale_codes, sw.scale_codes);
}

// int4 -> fp16 by the 0x6400 trick equals the exact dequantization rounded to fp16.
TEST(gpu_quantize_paths, int4_dequant_0x6400_is_exact) {
  NUMPROBE_REQUIRE_GPU();
  for (const char* scheme : {"int4-awq", "int4-g128"}) {
    const std::int64_t rows = 96, cols = 520;
    const std::vector<float> x = make_tensor(rows, cols, 5, family::m_mixed);
    const std::vector<double> xd(x.begin(), x.end());
    const formats::scheme_config cfg = formats::find_scheme(scheme).defaults;
    const formats::quant_result ref = formats::quantize(cfg, xd, rows, cols);
    quant_request r;
    r.kind = cfg.kind == formats::scheme_kind::m_asym ? quant_kind::m_asym : quant_kind::m_row_block;
    r.elem = cfg.kind == formats::scheme_kind::m_asym ? quant_elem::m_u4 : quant_elem::m_i4;
    r.scale = quant_scale::m_f16;
    r.rows = rows;
    r.cols = cols;
    r.block_cols = cfg.group;
    r.dequant = true;
    r.x = x.data();
    const quant_device_result d = cuda_quant_api().quantize(r);
    ASSERT_EQ(d.dequant_f16.size(), ref.dequant.size());
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < ref.dequant.size(); ++i) {
      const auto want = formats::encode(format_id::m_f16, ref.dequant[i]);
      if (d.dequant_f16[i] != want && ++bad < 5)
        ADD_FAILURE() << scheme << " #" << i << " x=" << x[i] << " device=0x" << std::hex
                      << d.dequant_f16[i] << " reference=0x" << want;
    }
    EXPECT_EQ(bad, 0) << scheme;
  }
}

TEST(gpu_quantize_paths, unsupported_scheme_is_an_input_error) {
  NUMPROBE_REQUIRE_GPU();
  auto prov = make_quant_provider("cuda");
  const formats::scheme_config cfg = formats::find_scheme("fp8-channel").defaults;
  EXPECT_NE(prov->unsupported(cfg), "");
  const std::vector<float> x(64, 1.f);
  EXPECT_THROW((void)prov->quantize(cfg, x, 8, 8), numprobe::error);
}

}  // namespace
}  // namespace numprobe::gpu::testing
