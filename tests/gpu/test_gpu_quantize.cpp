// GPU quantize kernels vs the reference codec (numprobe::formats::quantize), bit for bit:
// element codes, block scale codes, zero points and the NVFP4 tensor scale, over seeded random
// tensors that include exact ties, outliers, zeros of both signs, subnormal-scale blocks and
// (one family) NaN/inf. Device outputs are poisoned (0xFF) before each launch.
//
// The host-codec tests of the kernels' software encoders (quantize_codec.cuh against
// formats::encode, no device) are in tests/kernels/test_gpu_quantize_codec.cpp, so that CPU-only
// builds compile and run them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/conventions.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/formats/scheme.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/quant_provider.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace numprobe::gpu::testing {
namespace {

using formats::format_id;

enum class family { m_mixed, m_ties, m_tiny_blocks, m_specials, m_nvfp4_ties };

const char* family_name(family f) {
  switch (f) {
    case family::m_ties: return "ties";
    case family::m_tiny_blocks: return "tiny_blocks";
    case family::m_specials: return "specials";
    case family::m_nvfp4_ties: return "nvfp4_ties";
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

// NVFP4 tie-adversarial blocks (the `--dist ties` construction): s_t = 13/16 exactly, each
// block's amax 6 s with s an e4m3-like value times s_t (crossing e4m3's subnormal boundary), the
// other elements E2M1 midpoints times s, where a division and a reciprocal multiply round apart.
std::vector<float> make_nvfp4_ties(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> pick(0, 6), m(0, 7), e(-12, 6), sign(0, 1);
  const double st = 13.0 / 16.0, mids[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  double s = st;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (i % 16 == 0) s = (1.0 + m(g) / 8.0) * std::ldexp(1.0, e(g)) * st;
    x[i] = static_cast<float>((i % 16 == 5 ? 6.0 : mids[pick(g)]) * s * (sign(g) ? -1.0 : 1.0));
  }
  x[0] = static_cast<float>(6.0 * 448.0 * st);
  return x;
}

// A convention combination (formats/conventions.hpp) applied to the scheme's defaults.
struct qconv {
  formats::scale_division division = formats::scale_division::m_exact;
  formats::scale_floor floor = formats::scale_floor::m_subnormal;
  formats::scale_arith arith = formats::scale_arith::m_double;
  int rule = -1;  // formats::mx_rule, -1: the scheme's default
};

struct qcase {
  std::string scheme;
  std::int64_t rows, cols;
  family fam;
  std::uint64_t seed;
  qconv conv{};
};

formats::scheme_config config_of(const qcase& q) {
  auto c = formats::find_scheme(q.scheme).defaults;
  if (c.kind == formats::scheme_kind::m_nvfp4) c.conv = {q.conv.division, q.conv.floor, q.conv.arith};
  if (q.conv.rule >= 0) c.rule = static_cast<formats::mx_rule>(q.conv.rule);
  return c;
}

std::string conv_tag(const qcase& q) {
  const auto c = config_of(q);
  const auto d = formats::find_scheme(q.scheme).defaults;
  if (c.conv == d.conv && c.rule == d.rule) return "";
  std::string t;
  for (const auto& [axis, value] : formats::convention_values(c)) t += "_" + std::string(value);
  return t;
}

std::string qname(const ::testing::TestParamInfo<qcase>& i) {
  return sanitize(i.param.scheme + conv_tag(i.param) + "_" + std::to_string(i.param.rows) + "x" +
                  std::to_string(i.param.cols) + "_" + family_name(i.param.fam) + "_s" +
                  std::to_string(i.param.seed));
}

class gpu_quantize : public ::testing::TestWithParam<qcase> {};

TEST_P(gpu_quantize, bit_exact_with_reference_codec) {
  NUMPROBE_REQUIRE_GPU();
  const qcase& q = GetParam();
  const formats::scheme_config cfg = config_of(q);
  const std::vector<float> x = q.fam == family::m_nvfp4_ties ? make_nvfp4_ties(q.rows, q.cols, q.seed)
                                                             : make_tensor(q.rows, q.cols, q.seed, q.fam);
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
  std::printf("[quant-exact] %s%s %lldx%lld %s: %lld elements, %lld blocks, mismatches %lld/%lld, %s\n",
              q.scheme.c_str(), conv_tag(q).c_str(), static_cast<long long>(q.rows), static_cast<long long>(q.cols),
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
  // Every non-default NVFP4 convention combination and every other MX rule (issue 17), on the
  // tie-adversarial blocks and the mixed, tiny-block and special families.
  using formats::scale_division;
  const family conv_families[] = {family::m_nvfp4_ties, family::m_mixed, family::m_tiny_blocks,
                                  family::m_specials};
  for (auto d : {scale_division::m_exact, scale_division::m_reciprocal, scale_division::m_reciprocal_approx})
    for (auto fl : {formats::scale_floor::m_subnormal, formats::scale_floor::m_min_normal})
      for (auto a : {formats::scale_arith::m_double, formats::scale_arith::m_fp32}) {
        const qconv cv{d, fl, a, -1};
        if (cv.division == scale_division::m_exact && fl == formats::scale_floor::m_subnormal &&
            a == formats::scale_arith::m_double)
          continue;  // the default, above
        for (auto [r, c] : shapes)
          for (family f : conv_families) out.push_back({"nvfp4", r, c, f, seed++, cv});
      }
  for (const char* s : {"mxfp4", "mxfp8"})
    for (int rule = 1; rule <= 4; ++rule)
      for (auto [r, c] : shapes)
        for (family f : conv_families) out.push_back({s, r, c, f, seed++, qconv{.rule = rule}});
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
