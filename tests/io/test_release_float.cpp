// Released checkpoints, float layouts (src/io/release_float.cpp): small checkpoints are built
// here from each layout's documented rule (docs/checkpoints.md), with seeded random codes and
// scales, and the decode is checked against values computed here from the rule with tables
// written in this file (E2M1, e4m3fn, e8m0), not with numprobe's codecs. Every comparison is
// exact: each rule is a product of short significands (exact in double) or, for
// compressed-tensors NVFP4, one division checked by its exact residual.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "io_test_util.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/io/release.hpp"
#include "numprobe/io/safetensors.hpp"

namespace numprobe::io {
namespace {

using test::expect_input_error;
using json = nlohmann::json;
using u8v = std::vector<std::uint8_t>;
using shape_t = std::vector<std::uint64_t>;

// OCP MX v1.0 Table 5 (and gpt-oss weights.py FP4_VALUES): E2M1 by nibble, sign in bit 3.
double e2m1(unsigned n) {
  static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (n & 8 ? -1.0 : 1.0) * mag[n & 7];
}
// OCP FP8 E4M3 (fn): bias 7, subnormals at exponent 0, NaN only at S.1111.111.
double e4m3(unsigned b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double s = b & 0x80 ? -1.0 : 1.0;
  if (e == 15 && m == 7) return NAN;
  return s * (e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10));
}
double e8m0(unsigned b) { return std::ldexp(1.0, static_cast<int>(b) - 127); }

// A checkpoint under construction: tensors keep their bytes until written.
struct builder {
  std::vector<std::vector<std::byte>> store;
  std::vector<tensor_to_write> tensors;
  void raw(const std::string& name, dtype d, shape_t shape, const void* p, std::size_t n) {
    store.emplace_back(n);
    std::memcpy(store.back().data(), p, n);
    tensors.push_back({name, d, std::move(shape), store.back()});
  }
  void bytes(const std::string& name, dtype d, shape_t shape, const u8v& b) {
    raw(name, d, std::move(shape), b.data(), b.size());
  }
  void f32(const std::string& name, shape_t shape, const std::vector<float>& v) {
    raw(name, dtype::m_f32, std::move(shape), v.data(), v.size() * 4);
  }
  void write(const std::filesystem::path& dir, const json& qc = nullptr) {
    write_safetensors(dir / "model.safetensors", tensors);
    if (!qc.is_null()) std::ofstream(dir / "config.json") << json{{"quantization_config", qc}}.dump();
  }
};

struct rng {
  std::mt19937_64 g;
  explicit rng(std::uint64_t seed) : g(seed) {}
  unsigned below(unsigned n) { return static_cast<unsigned>(g() % n); }
  u8v bytes(std::size_t n, unsigned lo, unsigned hi) {  // uniform in [lo, hi]
    u8v v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>(lo + below(hi - lo + 1));
    return v;
  }
  u8v e4m3_codes(std::size_t n) {  // any e4m3fn code but NaN
    u8v v(n);
    for (auto& b : v) do b = static_cast<std::uint8_t>(below(256)); while ((b & 0x7F) == 0x7F);
    return v;
  }
  float positive(double lo, double hi) {
    return static_cast<float>(lo + (hi - lo) * static_cast<double>(g() >> 11) * 0x1p-53);
  }
};

const release_tensor& only(const release& r) {
  EXPECT_EQ(r.tensors().size(), 1u);
  return r.tensors().at(0);
}

// Slabs on the row grid, concatenated, equal the whole decode; each slab's scales are the
// whole tensor's scales of the block rows it covers, on formats::grid_of's grid.
void expect_slabs_match(const release& r, const release_tensor& t, std::int64_t step) {
  const auto whole = r.decode_rows(t, 0, t.rows);
  const auto g = formats::grid_of(t.scheme, t.rows, t.cols);
  ASSERT_EQ(whole.scales.size(), static_cast<std::size_t>(g.count())) << t.name;
  for (std::int64_t r0 = 0; r0 < t.rows; r0 += step) {
    const std::int64_t r1 = std::min(t.rows, r0 + step);
    const auto s = r.decode_rows(t, r0, r1);
    for (std::int64_t i = 0; i < (r1 - r0) * t.cols; ++i) {
      const auto w = static_cast<std::size_t>(r0 * t.cols + i);
      ASSERT_EQ(s.codes[i], whole.codes[w]);
      ASSERT_TRUE(s.values[i] == whole.values[w] ||
                  (std::isnan(s.values[i]) && std::isnan(whole.values[w])));
    }
    const std::int64_t b0 = r0 / g.block_rows * g.grid_cols;
    for (std::size_t j = 0; j < s.scales.size(); ++j) {
      ASSERT_EQ(s.scales[j], whole.scales[b0 + j]) << t.name << " slab " << r0;
      ASSERT_EQ(s.scale_codes[j], whole.scale_codes[b0 + j]);
    }
    EXPECT_EQ(s.tensor_scale, whole.tensor_scale);
  }
}

class release_float : public ::testing::Test {
 protected:
  std::filesystem::path dir = test::scratch_dir();
};

// [out, in] packed two nibbles per byte, low first.
u8v pack(const u8v& nibbles) {
  u8v p(nibbles.size() / 2);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = nibbles[2 * i] | (nibbles[2 * i + 1] << 4);
  return p;
}

struct nvfp4_case {
  std::int64_t out = 5, in = 40;  // 40: the third block of 16 is partial
  u8v nib, scale;
  float s2 = 0;
  explicit nvfp4_case(std::uint64_t seed, std::int64_t o = 5, std::int64_t i = 40) : out(o), in(i) {
    rng g(seed);
    nib = g.bytes(out * in, 0, 15);
    scale = g.bytes(out * ((in + 15) / 16), 0, 0x7E);  // positive e4m3, NaN excluded
    s2 = g.positive(1e-4, 1e-2);
  }
  [[nodiscard]] double value(std::int64_t r, std::int64_t c, double ts_mul, double ts_div) const {
    const std::int64_t nb = (in + 15) / 16;
    return e2m1(nib[r * in + c]) * e4m3(scale[r * nb + c / 16]) * ts_mul / ts_div;
  }
  void modelopt(builder& b, const std::string& x) const {
    const auto o = static_cast<std::uint64_t>(out), k = static_cast<std::uint64_t>(in);
    b.bytes(x + ".weight", dtype::m_u8, {o, k / 2}, pack(nib));
    b.bytes(x + ".weight_scale", dtype::m_e4m3fn, {o, (k + 15) / 16}, scale);
    b.f32(x + ".weight_scale_2", {}, {s2});
  }
};

json ct_config(const std::string& format, json weights = json::object()) {
  return {{"quant_method", "compressed-tensors"},
          {"format", format},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}}}}}};
}

TEST_F(release_float, modelopt_nvfp4_decodes_the_rule_and_records_input_scale) {
  const nvfp4_case c(11);
  builder b;
  c.modelopt(b, "model.layers.0.mlp.up_proj");
  b.f32("model.layers.0.mlp.up_proj.input_scale", {}, {0.25f});
  b.f32("model.norm.weight", {4}, {1, 2, 3, 4});
  b.write(dir, {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}});
  const auto r = release::open(dir);
  EXPECT_EQ(r.layout(), release_layout::m_modelopt_nvfp4);
  EXPECT_NE(r.detected_by().find("config.json"), std::string::npos) << r.detected_by();
  EXPECT_EQ(r.passthrough(), std::vector<std::string>{"model.norm.weight"});
  const auto& t = only(r);
  EXPECT_EQ(t.name, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(t.rows, c.out);
  EXPECT_EQ(t.cols, c.in);
  EXPECT_EQ(t.scheme_name, "nvfp4");
  EXPECT_EQ(t.record["input_scale"].get<double>(), 0.25);
  const auto s = r.decode_rows(t, 0, t.rows);
  EXPECT_EQ(s.tensor_scale, static_cast<double>(c.s2));
  for (std::int64_t i = 0; i < c.out; ++i)
    for (std::int64_t j = 0; j < c.in; ++j) {
      ASSERT_EQ(s.values[i * c.in + j], c.value(i, j, c.s2, 1.0)) << i << "," << j;
      ASSERT_EQ(s.codes[i * c.in + j], c.nib[i * c.in + j]);
    }
  for (std::size_t k = 0; k < c.scale.size(); ++k) {
    EXPECT_EQ(s.scale_codes[k], c.scale[k]);
    EXPECT_EQ(s.scales[k], e4m3(c.scale[k]));
  }
  expect_slabs_match(r, t, 2);
}

TEST_F(release_float, modelopt_detected_by_hf_quant_config_and_by_names) {
  const nvfp4_case c(12);
  builder b;
  c.modelopt(b, "lin");
  b.write(dir);
  EXPECT_EQ(release::open(dir / "model.safetensors").detected_by(), "tensor names (modelopt-nvfp4)");
  std::ofstream(dir / "hf_quant_config.json")
      << R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}})";
  EXPECT_EQ(release::open(dir).detected_by(), "hf_quant_config.json (quant_algo=NVFP4)");
}

TEST_F(release_float, ct_nvfp4_divides_by_the_global_scale_and_records_inexact_inverse) {
  for (const float g : {64.0f, 3.7f}) {  // 1/64 is exact in fp32; 1/3.7 is not
    const nvfp4_case c(13, 7, 48);
    builder b;
    b.bytes("m.weight_packed", dtype::m_u8, {7, 24}, pack(c.nib));
    b.bytes("m.weight_scale", dtype::m_e4m3fn, {7, 3}, c.scale);
    b.f32("m.weight_global_scale", {1}, {g});
    b.write(dir, ct_config("nvfp4-pack-quantized"));
    const auto r = release::open(dir);
    EXPECT_EQ(r.layout(), release_layout::m_ct_nvfp4);
    const auto& t = only(r);
    EXPECT_EQ(t.name, "m.weight");
    EXPECT_EQ(t.record["tensor_scale_exact"].get<bool>(), g == 64.0f);
    const auto s = r.decode_rows(t, 0, t.rows);
    EXPECT_EQ(s.tensor_scale, static_cast<double>(1.0f / g));
    for (std::int64_t i = 0; i < 7 * 48; ++i) {
      const double num = c.value(i / 48, i % 48, 1.0, 1.0), v = s.values[i];
      // One rounding of num/g: the exact residual v*g - num is within half an ulp of v times g.
      const double resid = std::fma(v, g, -num);
      ASSERT_LE(std::fabs(resid), 0.5 * (std::nextafter(std::fabs(v), INFINITY) - std::fabs(v)) * g);
      if (g == 64.0f) {
        ASSERT_EQ(v, num / 64.0);
      }
    }
    expect_slabs_match(r, t, 3);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
}

TEST_F(release_float, ct_mxfp4_e8m0_blocks_of_32_with_a_partial_block) {
  rng g(14);
  const std::int64_t out = 3, in = 40;  // 40 = 32 + a partial block of 8
  const u8v nib = g.bytes(out * in, 0, 15), sc = g.bytes(out * 2, 100, 150);
  builder b;
  b.bytes("m.weight_packed", dtype::m_u8, {3, 20}, pack(nib));
  b.bytes("m.weight_scale", dtype::m_u8, {3, 2}, sc);
  b.write(dir);  // no config: detected by names (u8 scales)
  const auto r = release::open(dir);
  EXPECT_EQ(r.layout(), release_layout::m_ct_mxfp4);
  const auto& t = only(r);
  EXPECT_EQ(t.scheme_name, "mxfp4");
  const auto s = r.decode_rows(t, 0, t.rows);
  for (std::int64_t i = 0; i < out * in; ++i)
    ASSERT_EQ(s.values[i], e2m1(nib[i]) * e8m0(sc[(i / in) * 2 + (i % in) / 32]));
  expect_slabs_match(r, t, 1);
}

TEST_F(release_float, gptoss_mxfp4_experts_are_rows_and_both_name_forms_read) {
  rng g(15);
  const u8v blocks = g.bytes(2 * 3 * 2 * 16, 0, 255), sc = g.bytes(2 * 3 * 2, 110, 140);
  for (const std::string sep : {"_", "."}) {
    builder b;
    b.bytes("block.0.mlp.mlp1_weight" + sep + "blocks", dtype::m_u8, {2, 3, 2, 16}, blocks);
    b.bytes("block.0.mlp.mlp1_weight" + sep + "scales", dtype::m_u8, {2, 3, 2}, sc);
    b.write(dir, {{"quant_method", "mxfp4"}});
    const auto r = release::open(dir);
    EXPECT_EQ(r.layout(), release_layout::m_gptoss_mxfp4);
    const auto& t = only(r);
    EXPECT_EQ(t.name, "block.0.mlp.mlp1_weight");
    EXPECT_EQ(t.rows, 6);
    EXPECT_EQ(t.cols, 64);
    EXPECT_EQ(t.shape, (shape_t{2, 3, 64}));
    const auto s = r.decode_rows(t, 0, t.rows);
    // weights.py: out[:, 0::2] = lut[blk & 0x0F], out[:, 1::2] = lut[blk >> 4], ldexp(scale - 127)
    for (std::int64_t row = 0; row < 6; ++row)
      for (std::int64_t k = 0; k < 64; ++k) {
        const std::uint8_t byte = blocks[row * 32 + k / 2];
        const double v = e2m1(k % 2 ? byte >> 4 : byte & 15) * e8m0(sc[row * 2 + k / 32]);
        ASSERT_EQ(s.values[row * 64 + k], v);
      }
    expect_slabs_match(r, t, 4);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
}

struct fp8_case {
  std::int64_t out, in;
  u8v w;
  std::vector<float> s;
  fp8_case(std::uint64_t seed, std::int64_t o, std::int64_t i, std::size_t ns) : out(o), in(i) {
    rng g(seed);
    w = g.e4m3_codes(out * in);
    for (std::size_t k = 0; k < ns; ++k) s.push_back(g.positive(1e-3, 1.0));
  }
};

TEST_F(release_float, deepseek_fp8_blocks_cross_128_and_slabs_follow_the_row_grid) {
  const fp8_case c(16, 130, 200, 4);  // scale_inv [2, 2]: both last blocks partial
  builder b;
  b.bytes("model.layers.0.self_attn.q_proj.weight", dtype::m_e4m3fn, {130, 200}, c.w);
  b.f32("model.layers.0.self_attn.q_proj.weight_scale_inv", {2, 2}, c.s);
  b.write(dir, {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}});
  const auto r = release::open(dir);
  EXPECT_EQ(r.layout(), release_layout::m_deepseek_fp8);
  const auto& t = only(r);
  EXPECT_EQ(t.row_align, 128);
  EXPECT_EQ(t.scheme_name, "fp8-block128");
  const auto s = r.decode_rows(t, 0, t.rows);
  for (std::int64_t i = 0; i < 130; ++i)
    for (std::int64_t j = 0; j < 200; ++j)  // fp8_cast_bf16 / weight_dequant: y = x * s
      ASSERT_EQ(s.values[i * 200 + j], e4m3(c.w[i * 200 + j]) * c.s[(i / 128) * 2 + j / 128]);
  expect_slabs_match(r, t, 128);
  expect_input_error([&] { (void)r.decode_rows(t, 64, 128); }, t.name, "row grid of 128");
  expect_input_error([&] { (void)r.decode_rows(t, 0, 131); }, t.name, "outside");
}

TEST_F(release_float, ct_fp8_per_tensor_channel_and_block_from_config_or_shape) {
  struct form {
    std::string strategy;
    shape_t scale_shape;
    std::int64_t br, bc;
    const char* scheme;
  };
  const std::vector<form> forms = {
      {"tensor", {1}, 70, 96, "fp8-tensor"},
      {"channel", {70, 1}, 1, 96, "fp8-channel"},
      {"block", {2, 3}, 64, 32, "block2d"},  // 70 rows, 96 cols: [ceil(70/64), ceil(96/32)]
  };
  for (const bool with_config : {true, false}) {
    for (const auto& f : forms) {
      if (!with_config && f.strategy == "block") continue;  // shape inference assumes 128x128
      const std::size_t ns = f.scale_shape[0] * (f.scale_shape.size() > 1 ? f.scale_shape[1] : 1);
      const fp8_case c(17, 70, 96, ns);
      builder b;
      b.bytes("x.weight", dtype::m_e4m3fn, {70, 96}, c.w);
      b.f32("x.weight_scale", f.scale_shape, c.s);
      json w = {{"type", "float"}, {"num_bits", 8}, {"strategy", f.strategy}};
      if (f.strategy == "block") w["block_structure"] = {f.br, f.bc};
      b.write(dir, with_config ? ct_config("float-quantized", w) : json());
      const auto r = release::open(dir);
      EXPECT_EQ(r.layout(), release_layout::m_ct_fp8);
      const auto& t = only(r);
      EXPECT_EQ(t.scheme_name, f.scheme) << f.strategy;
      EXPECT_EQ(t.record["strategy"], f.strategy);
      const auto s = r.decode_rows(t, 0, t.rows);
      const std::int64_t gc = (96 + f.bc - 1) / f.bc;
      for (std::int64_t i = 0; i < 70 * 96; ++i)
        ASSERT_EQ(s.values[i], e4m3(c.w[i]) * c.s[(i / 96 / f.br) * gc + (i % 96) / f.bc]);
      expect_slabs_match(r, t, t.row_align == 1 ? 3 : t.row_align);
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
    }
  }
}

TEST_F(release_float, modelopt_fp8_strategy_from_quant_algo) {
  // ModelOpt's hf_quant_config.json names the algorithm; the tensors are those of ct-fp8
  // (weight F8_E4M3, weight_scale F32, dequant = code * scale), 70 x 300 so that 128-blocks
  // leave partial tiles in both directions ([1, 3] scales; FP8_PB_WO's blocks are 128 x 128).
  struct form {
    const char* algo;
    shape_t scale_shape;
    std::int64_t br, bc;
    const char* scheme;
  };
  const std::vector<form> forms = {
      {"FP8", {}, 70, 300, "fp8-tensor"},
      {"FP8_PER_CHANNEL_PER_TOKEN", {70, 1}, 1, 300, "fp8-channel"},
      {"fp8_pb_wo", {1, 3}, 128, 128, "fp8-block128"},  // ModelOpt may spell it in lower case
  };
  for (const auto& f : forms) {
    const std::size_t ns = f.scale_shape.empty() ? 1 : f.scale_shape[0] * f.scale_shape[1];
    const fp8_case c(23, 70, 300, ns);
    builder b;
    b.bytes("model.layers.0.self_attn.q_proj.weight", dtype::m_e4m3fn, {70, 300}, c.w);
    b.f32("model.layers.0.self_attn.q_proj.weight_scale", f.scale_shape, c.s);
    b.f32("model.layers.0.self_attn.q_proj.input_scale", {}, {0.5f});
    b.write(dir);
    std::ofstream(dir / "hf_quant_config.json")
        << json{{"producer", {{"name", "modelopt"}}}, {"quantization", {{"quant_algo", f.algo}}}}.dump();
    const auto r = release::open(dir);
    EXPECT_EQ(r.layout(), release_layout::m_modelopt_fp8) << f.algo;
    EXPECT_EQ(r.detected_by(), std::string("hf_quant_config.json (quant_algo=") + f.algo + ")");
    const auto& t = only(r);
    EXPECT_EQ(t.scheme_name, f.scheme) << f.algo;
    const auto s = r.decode_rows(t, 0, t.rows);
    const std::int64_t gc = (300 + f.bc - 1) / f.bc;
    for (std::int64_t i = 0; i < 70 * 300; ++i)
      ASSERT_EQ(s.values[i], e4m3(c.w[i]) * c.s[(i / 300 / f.br) * gc + (i % 300) / f.bc]) << f.algo;
    // Without the config the same tensors read as compressed-tensors float-quantized.
    std::filesystem::remove(dir / "hf_quant_config.json");
    EXPECT_EQ(release::open(dir).layout(), release_layout::m_ct_fp8) << f.algo;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  // A per-tensor algorithm with a per-channel scale is malformed: exit 2 naming the scale.
  const fp8_case c(24, 8, 32, 8);
  builder b;
  b.bytes("m.weight", dtype::m_e4m3fn, {8, 32}, c.w);
  b.f32("m.weight_scale", {8, 1}, c.s);
  b.write(dir);
  std::ofstream(dir / "hf_quant_config.json") << R"({"quantization": {"quant_algo": "FP8"}})";
  expect_input_error([&] { (void)release::open(dir); }, "m.weight_scale", "strategy tensor");
}

TEST_F(release_float, layout_override_contradiction_and_names) {
  const nvfp4_case c(18);
  builder b;
  c.modelopt(b, "lin");
  b.write(dir, ct_config("nvfp4-pack-quantized"));  // the config is wrong about the tensors
  expect_input_error([&] { (void)release::open(dir); }, dir.string(),
                     "quantization_config says ct-nvfp4");
  const auto r = release::open(dir, release_layout::m_modelopt_nvfp4);
  EXPECT_EQ(r.detected_by(), "--layout");
  EXPECT_EQ(only(r).rows, c.out);
  EXPECT_EQ(parse_release_layout("deepseek-fp8"), release_layout::m_deepseek_fp8);
  for (const auto l : all_release_layouts()) EXPECT_EQ(parse_release_layout(name(l)), l);
  expect_input_error([] { (void)parse_release_layout("nvfp5"); }, "--layout", "gptoss-mxfp4");

  builder both;  // a ModelOpt tensor and a DeepSeek tensor side by side, no config
  c.modelopt(both, "a");
  both.bytes("b.weight", dtype::m_e4m3fn, {1, 1}, {0x38});
  both.f32("b.weight_scale_inv", {1, 1}, {1.0f});
  std::filesystem::remove(dir / "config.json");
  both.write(dir);
  expect_input_error([&] { (void)release::open(dir); }, dir.string(), "pass --layout");
  std::ofstream(dir / "config.json") << R"({"quantization_config": {"quant_method": "bnb"}})";
  expect_input_error([&] { (void)release::open(dir); }, dir.string(), "names no known layout");
}

// Writes one checkpoint, opens it and expects exit 2 naming `tensor` and `what` (at open or
// at the first decode).
void expect_malformed(const std::filesystem::path& dir, builder& b, const json& qc,
                      const std::string& tensor, const std::string& what) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  b.write(dir, qc);
  expect_input_error(
      [&] {
        const auto r = release::open(dir);
        for (const auto& t : r.tensors()) (void)r.decode_rows(t, 0, t.rows);
      },
      tensor, what);
}

TEST_F(release_float, every_malformed_case_is_exit_2_naming_the_tensor) {
  const nvfp4_case c(19);
  const json mo = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}};
  {  // wrong scale shape
    builder b;
    b.bytes("l.weight", dtype::m_u8, {5, 20}, pack(c.nib));
    b.bytes("l.weight_scale", dtype::m_e4m3fn, {5, 2}, u8v(10, 0x38));
    b.f32("l.weight_scale_2", {}, {1.0f});
    expect_malformed(dir, b, mo, "l.weight_scale", "expected [5, 3]");
  }
  {  // missing weight_scale_2; NaN block scale; inf tensor scale
    builder b;
    b.bytes("l.weight", dtype::m_u8, {5, 20}, pack(c.nib));
    b.bytes("l.weight_scale", dtype::m_e4m3fn, {5, 3}, c.scale);
    expect_malformed(dir, b, mo, "l.weight_scale_2", "missing");
    b.f32("l.weight_scale_2", {}, {INFINITY});
    expect_malformed(dir, b, mo, "l.weight_scale_2", "finite");
    auto nan_scale = c.scale;
    nan_scale[4] = 0x7F;
    b.tensors.clear();
    b.bytes("l.weight", dtype::m_u8, {5, 20}, pack(c.nib));
    b.bytes("l.weight_scale", dtype::m_e4m3fn, {5, 3}, nan_scale);
    b.f32("l.weight_scale_2", {}, {1.0f});
    expect_malformed(dir, b, mo, "l.weight_scale", "NaN");
  }
  {  // an NVFP4 weight stored as F32 or int8 beside its e4m3 block scales: refused, not passed
     // through with orphan scales (issue 27 item 6)
    for (const auto d : {dtype::m_f32, dtype::m_i8}) {
      builder b;
      c.modelopt(b, "good");
      b.bytes("l.weight", d, {5, d == dtype::m_f32 ? 10u : 40u}, u8v(200, 0x3C));
      b.bytes("l.weight_scale", dtype::m_e4m3fn, {5, 3}, c.scale);
      b.f32("l.weight_scale_2", {}, {1.0f});
      expect_malformed(dir, b, mo, "l.weight", "packed uint8 fp4 codes");
    }
  }
  const json ct = ct_config("nvfp4-pack-quantized");
  {  // compressed-tensors: block scales beside a weight that is not packed
    builder b;
    b.bytes("good.weight_packed", dtype::m_u8, {5, 20}, pack(c.nib));
    b.bytes("good.weight_scale", dtype::m_e4m3fn, {5, 3}, c.scale);
    b.f32("good.weight_global_scale", {1}, {100.0f});
    b.bytes("l.weight", dtype::m_f32, {5, 10}, u8v(200, 0x3C));
    b.bytes("l.weight_scale", dtype::m_e4m3fn, {5, 3}, c.scale);
    expect_malformed(dir, b, ct, "l.weight", "weight_packed");
  }
  {  // missing global scale; odd K and packed size mismatch from weight_shape
    builder b;
    b.bytes("l.weight_packed", dtype::m_u8, {5, 20}, pack(c.nib));
    b.bytes("l.weight_scale", dtype::m_e4m3fn, {5, 3}, c.scale);
    expect_malformed(dir, b, ct, "l.weight_global_scale", "missing");
    b.f32("l.weight_global_scale", {1}, {100.0f});
    const std::vector<std::pair<float, std::string>> bad_k = {{39, "odd K"}, {42, "packed size"}};
    for (const auto& [k, what] : bad_k) {
      builder w = b;  // its spans still point into b's buffers, which outlive w
      w.f32("l.weight_shape", {2}, {5.0f, k});
      expect_malformed(dir, w, ct, "l.weight_packed", what);
    }
  }
  {  // mx NaN scale
    builder b;
    b.bytes("l.weight_packed", dtype::m_u8, {1, 16}, u8v(16, 0x21));
    b.bytes("l.weight_scale", dtype::m_u8, {1, 1}, {0xFF});
    expect_malformed(dir, b, ct_config("mxfp4-pack-quantized"), "l.weight_scale", "0xFF");
  }
  {  // gpt-oss blocks of 15 bytes; scales not matching the blocks
    builder b;
    b.bytes("e.w_blocks", dtype::m_u8, {2, 1, 15}, u8v(30, 0));
    b.bytes("e.w_scales", dtype::m_u8, {2, 1}, u8v(2, 127));
    expect_malformed(dir, b, {{"quant_method", "mxfp4"}}, "e.w_blocks", "[..., G, 16]");
    builder m;
    m.bytes("e.w_blocks", dtype::m_u8, {2, 1, 16}, u8v(32, 0));
    m.bytes("e.w_scales", dtype::m_u8, {2, 2}, u8v(4, 127));
    expect_malformed(dir, m, {{"quant_method", "mxfp4"}}, "e.w_scales", "expected [2, 1]");
  }
  const json ds = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  {  // DeepSeek: scale_inv shape, missing scale_inv, NaN scale
    builder b;
    b.bytes("d.weight", dtype::m_e4m3fn, {130, 2}, u8v(260, 0x38));
    b.f32("d.weight_scale_inv", {1, 1}, {1.0f});
    expect_malformed(dir, b, ds, "d.weight_scale_inv", "expected [2, 1]");
    builder n;
    n.bytes("d.weight", dtype::m_e4m3fn, {130, 2}, u8v(260, 0x38));
    n.bytes("q.weight", dtype::m_e4m3fn, {1, 2}, u8v(2, 0x38));
    n.f32("d.weight_scale_inv", {2, 1}, {1.0f, NAN});
    expect_malformed(dir, n, ds, "q.weight_scale_inv", "missing");
    builder f;
    f.bytes("d.weight", dtype::m_e4m3fn, {130, 2}, u8v(260, 0x38));
    f.f32("d.weight_scale_inv", {2, 1}, {1.0f, NAN});
    expect_malformed(dir, f, ds, "d.weight_scale_inv", "finite");
  }
  {  // compressed-tensors fp8: a channel scale that is not [out, 1]
    builder b;
    b.bytes("x.weight", dtype::m_e4m3fn, {4, 2}, u8v(8, 0x38));
    b.f32("x.weight_scale", {3, 1}, {1, 1, 1});
    expect_malformed(dir, b, ct_config("float-quantized", {{"type", "float"}, {"strategy", "channel"}}),
                     "x.weight_scale", "expected [4, 1]");
  }
}

// A release written from numprobe's own quantizer decodes to its codes, scales and values:
// the layout-to-scheme mapping agrees with formats::quantize's grid and codes.
TEST_F(release_float, release_of_numprobe_quantizer_output_gives_back_its_codes) {
  std::mt19937_64 g(20);
  std::normal_distribution<double> nd(0.0, 1.0);
  const auto check = [&](const char* scheme, std::int64_t rows, std::int64_t cols, auto write) {
    std::vector<double> x(static_cast<std::size_t>(rows * cols));
    for (auto& v : x) v = nd(g);
    const auto q = formats::quantize(formats::find_scheme(scheme).defaults, x, rows, cols);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    builder b;
    write(b, q);
    b.write(dir);
    const auto r = release::open(dir);
    const auto& t = only(r);
    EXPECT_EQ(t.scheme_name, scheme);
    EXPECT_EQ(t.scheme.kind, q.config.kind);
    const auto s = r.decode_rows(t, 0, t.rows);
    EXPECT_EQ(s.codes, q.codes) << scheme;
    EXPECT_EQ(s.values, q.dequant) << scheme;
    ASSERT_EQ(s.scale_codes.size(), q.blocks.size()) << scheme;
    for (std::size_t k = 0; k < q.blocks.size(); ++k)
      ASSERT_EQ(s.scale_codes[k], q.blocks[k].scale_code) << scheme << " block " << k;
    EXPECT_EQ(s.tensor_scale, q.tensor_scale);
  };
  const auto bytes_of = [](const std::vector<std::uint32_t>& v) { return u8v(v.begin(), v.end()); };
  const auto scale_bytes = [](const formats::quant_result& q) {
    u8v v;
    for (const auto& bk : q.blocks) v.push_back(static_cast<std::uint8_t>(bk.scale_code));
    return v;
  };
  check("nvfp4", 20, 48, [&](builder& b, const formats::quant_result& q) {
    b.bytes("l.weight", dtype::m_u8, {20, 24}, pack(bytes_of(q.codes)));
    b.bytes("l.weight_scale", dtype::m_e4m3fn, {20, 3}, scale_bytes(q));
    b.f32("l.weight_scale_2", {}, {static_cast<float>(q.tensor_scale)});
  });
  check("mxfp4", 6, 96, [&](builder& b, const formats::quant_result& q) {
    b.bytes("e.w_blocks", dtype::m_u8, {2, 3, 3, 16}, pack(bytes_of(q.codes)));
    b.bytes("e.w_scales", dtype::m_u8, {2, 3, 3}, scale_bytes(q));
  });
  check("fp8-block128", 130, 200, [&](builder& b, const formats::quant_result& q) {
    b.bytes("d.weight", dtype::m_e4m3fn, {130, 200}, bytes_of(q.codes));
    std::vector<float> s;
    for (const auto& bk : q.blocks) s.push_back(static_cast<float>(bk.scale));
    b.f32("d.weight_scale_inv", {2, 2}, s);
  });
  check("fp8-channel", 9, 40, [&](builder& b, const formats::quant_result& q) {
    b.bytes("c.weight", dtype::m_e4m3fn, {9, 40}, bytes_of(q.codes));
    std::vector<float> s;
    for (const auto& bk : q.blocks) s.push_back(static_cast<float>(bk.scale));
    b.f32("c.weight_scale", {9, 1}, s);
  });
}

}  // namespace
}  // namespace numprobe::io
