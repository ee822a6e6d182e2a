// scan RELEASE --against ORIGINAL and convert (issue 18 items 2 and 3), end to end: an original
// f32 checkpoint, a ModelOpt NVFP4 release made from it here (formats::quantize's codes, packed
// by the documented rule: two e2m1 per byte, low nibble first, e4m3 block scales, fp32 s_t), then
// the release scanned, identified and converted, and the written checkpoints read back.
// Expected errors are computed here from the codes the test itself packed, not by the probes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <random>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "numprobe/base/error.hpp"
#include "numprobe/core/bound.hpp"
#include "numprobe/formats/conventions.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/io/release.hpp"
#include "numprobe/io/safetensors.hpp"
#include "probes/release/convert_probe.hpp"
#include "probes/release/release_probe.hpp"

namespace numprobe::probes {
namespace {

namespace fs = std::filesystem;
namespace nf = numprobe::formats;

constexpr std::int64_t k_rows = 130, k_cols = 256;  // rows cross the 128-row blocks of fp8-block128

struct fixture {
  fs::path dir;
  std::vector<std::vector<double>> weights;  // the original's two weights
  std::vector<float> norm;
};

fs::path scratch(const std::string& name) {
  const auto d = fs::temp_directory_path() / "numprobe_release_convert" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Seeded weights with four outlier input channels (x 60) in the second.
fixture make_original(const fs::path& dir) {
  fixture f;
  f.dir = dir;
  std::mt19937_64 g(29);
  std::normal_distribution<float> n(0.f, 0.02f);
  std::vector<io::tensor_to_write> ts;
  std::vector<std::vector<float>> keep;
  for (int w = 0; w < 2; ++w) {
    std::vector<float> v(static_cast<std::size_t>(k_rows * k_cols));
    for (std::int64_t i = 0; i < k_rows * k_cols; ++i) {
      v[static_cast<std::size_t>(i)] = n(g);
      if (w == 1 && (i % k_cols) % 64 == 3) v[static_cast<std::size_t>(i)] *= 60.f;
    }
    f.weights.emplace_back(v.begin(), v.end());
    keep.push_back(std::move(v));
  }
  {
    // The tie weight: s_t = 13/16 (its amax 6 * 448 * 13/16), blocks of E2M1 midpoints times an
    // e4m3 value times s_t, each with one element at 6 s.
    const double st = 13.0 / 16.0, mids[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
    std::uniform_int_distribution<int> pick(0, 6), m(0, 7), e(-8, 4), sign(0, 1);
    std::vector<float> v(static_cast<std::size_t>(k_rows * k_cols));
    double s = st;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i % 16 == 0) s = (1.0 + m(g) / 8.0) * std::ldexp(1.0, e(g)) * st;
      v[i] = static_cast<float>((i % 16 == 7 ? 6.0 : mids[pick(g)]) * s * (sign(g) ? -1.0 : 1.0));
    }
    v[0] = static_cast<float>(6.0 * 448.0 * st);
    f.weights.emplace_back(v.begin(), v.end());
    keep.push_back(std::move(v));
  }
  f.norm.assign(k_cols, 1.0f);
  for (auto& v : f.norm) v += n(g);
  fs::create_directories(dir / "orig");
  io::write_safetensors(dir / "orig" / "model.safetensors",
                        {io::tensor_of("model.layers.0.mlp.up_proj.weight", {k_rows, k_cols}, keep[0]),
                         io::tensor_of("model.layers.0.mlp.down_proj.weight", {k_rows, k_cols}, keep[1]),
                         io::tensor_of("model.layers.0.mlp.ties.weight", {k_rows, k_cols}, keep[2]),
                         io::tensor_of("model.norm.weight", {k_cols}, f.norm)});
  return f;
}

// The release under `c`'s conventions: ModelOpt's tensors from formats::quantize.
void make_release(const fixture& f, const nf::scheme_config& c, const fs::path& out) {
  fs::create_directories(out);
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<std::vector<float>> floats;
  std::vector<io::tensor_to_write> ts;
  const char* names[3] = {"model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj", "model.layers.0.mlp.ties"};
  for (int w = 0; w < 3; ++w) {
    const auto q = nf::quantize(c, f.weights[static_cast<std::size_t>(w)], k_rows, k_cols);
    auto& packed = bytes.emplace_back();
    for (std::size_t i = 0; i < q.codes.size(); i += 2)
      packed.push_back(static_cast<std::uint8_t>((q.codes[i] & 0xF) | ((q.codes[i + 1] & 0xF) << 4)));
    auto& scales = bytes.emplace_back();
    for (const auto& b : q.blocks) scales.push_back(static_cast<std::uint8_t>(b.scale_code));
    floats.push_back({static_cast<float>(q.tensor_scale)});
  }
  for (int w = 0; w < 3; ++w) {
    const std::string p = names[w];
    ts.push_back({p + ".weight", io::dtype::m_u8, {k_rows, k_cols / 2}, std::as_bytes(std::span(bytes[2 * w]))});
    ts.push_back({p + ".weight_scale", io::dtype::m_e4m3fn, {k_rows, k_cols / 16}, std::as_bytes(std::span(bytes[2 * w + 1]))});
    ts.push_back({p + ".weight_scale_2", io::dtype::m_f32, {}, std::as_bytes(std::span(floats[w]))});
  }
  ts.push_back(io::tensor_of("model.norm.weight", {k_cols}, f.norm));
  io::write_safetensors(out / "model.safetensors", std::move(ts));
  std::ofstream(out / "config.json") << nlohmann::json{{"model_type", "llama"},
                                                       {"quantization_config", {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16}}}}
                                            .dump();
}

double sqnr_db(const std::vector<double>& ref, const std::vector<double>& v) {
  double s = 0, e = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    s += ref[i] * ref[i];
    e += (v[i] - ref[i]) * (v[i] - ref[i]);
  }
  return 10.0 * std::log10(s / e);
}

TEST(release_scan, against_the_original_measures_and_identifies_the_conventions) {
  const auto dir = scratch("scan");
  const auto f = make_original(dir);
  const auto base = nf::find_scheme("nvfp4").defaults;
  auto torchao = base;
  nf::apply_convention_preset("torchao", torchao);
  make_release(f, base, dir / "def");
  make_release(f, torchao, dir / "tao");
  EXPECT_TRUE(looks_like_release((dir / "def").string()));
  EXPECT_FALSE(looks_like_release((dir / "orig" / "model.safetensors").string()));

  release_scan_options o;
  o.release = (dir / "def").string();
  o.against = (dir / "orig" / "model.safetensors").string();
  const auto r = run_release_scan(o);
  EXPECT_EQ(r.layout, "modelopt-nvfp4");
  ASSERT_EQ(r.tensors.size(), 3u);
  EXPECT_EQ(r.passthrough, 1u);
  for (const auto& t : r.tensors) {
    ASSERT_TRUE(t.against.has_value()) << t.tensor.name;
    const auto& a = *t.against;
    const std::size_t w = t.tensor.name.find("up_proj") != std::string::npos   ? 0
                          : t.tensor.name.find("down_proj") != std::string::npos ? 1
                                                                                 : 2;
    const auto q = nf::quantize(base, f.weights[w], k_rows, k_cols);
    EXPECT_NEAR(a.sqnr_db, sqnr_db(f.weights[w], q.dequant), 1e-9) << t.tensor.name;  // same sums, same order
    EXPECT_EQ(a.flushed, q.flushed) << t.tensor.name;
    ASSERT_TRUE(a.identify.has_value());
    ASSERT_GE(a.identify->match, 0) << t.tensor.name;
    EXPECT_EQ(a.identify->candidates[static_cast<std::size_t>(a.identify->match)].config.conv, base.conv);
    EXPECT_TRUE(a.tensor_scale_match);
  }
  // The outlier-channel weight: each of its 4 outlier channels sets its blocks' scale and
  // flushes the neighbours, so it holds far more outlier flushes than the plain one.
  const auto by_name = [&](const char* part) -> const release_tensor_report& {
    for (const auto& x : r.tensors)
      if (x.tensor.name.find(part) != std::string::npos) return x;
    throw std::runtime_error(part);
  };
  const auto& down = by_name("down_proj");
  const auto& up = by_name("up_proj");
  EXPECT_GT(down.against->outlier_flushed, 2 * up.against->outlier_flushed);
  const auto j = to_json(r);
  EXPECT_EQ(j["tensors"][0]["layout"], "modelopt-nvfp4");
  EXPECT_TRUE(j["tensors"][0]["against"]["identify"]["match"].is_object());

  // A release made by torchao's rules: its conventions are among the matching candidates, and
  // on the tie weight (E2M1 midpoints times exact block scales, where a division and a
  // reciprocal multiply round apart) the definition does not match it.
  o.release = (dir / "tao").string();
  const auto t = run_release_scan(o);
  ASSERT_EQ(t.tensors.size(), 3u);
  for (const auto& x : t.tensors) {
    const auto& cands = x.against->identify->candidates;
    const bool torchao_matches = std::any_of(cands.begin(), cands.end(), [&](const auto& c) {
      return c.config.conv == torchao.conv && c.matches();
    });
    EXPECT_TRUE(torchao_matches) << x.tensor.name;
    if (x.tensor.name.find("ties") == std::string::npos) continue;
    EXPECT_FALSE(cands[0].matches()) << "the definition must not match the tie weight's torchao codes";
    EXPECT_GT(cands[0].code_mismatches, 0);
  }

  // Alone: the release's own statistics (histogram over all codes, scales in range).
  release_scan_options alone;
  alone.release = (dir / "def").string();
  const auto s = run_release_scan(alone);
  std::int64_t codes = 0;
  for (const auto c : s.tensors[0].stats.code_histogram) codes += c;
  EXPECT_EQ(codes, k_rows * k_cols);
  EXPECT_GT(s.tensors[0].stats.scale_max, 0.0);
  EXPECT_FALSE(s.tensors[0].against.has_value());
  EXPECT_THROW((void)release_metric(s, "sqnr_db"), numprobe::error);  // needs --against
}

TEST(convert, nvfp4_release_to_mxfp4_and_fp8_writes_checkpoints_that_read_back) {
  const auto dir = scratch("convert");
  const auto f = make_original(dir);
  const auto base = nf::find_scheme("nvfp4").defaults;
  make_release(f, base, dir / "rel");
  const auto rel = io::release::open(dir / "rel");

  for (const char* to : {"nvfp4", "mxfp4", "fp8-block128", "fp8-channel"}) {
    convert_options o;
    o.release = (dir / "rel").string();
    o.against = (dir / "orig" / "model.safetensors").string();
    o.target_name = to;
    o.target = nf::find_scheme(to).defaults;
    o.write = (dir / (std::string("out-") + to)).string();
    o.shard_bytes = 20000;  // several shards from this small release
    const auto r = run_convert(o);
    ASSERT_EQ(r.tensors.size(), 3u);
    EXPECT_GT(r.files.size(), 3u) << to;  // shards + index + config
    // Read back through the release readers: the codes are formats::quantize's of the
    // release's values, and the added error is the one reported.
    const auto back = io::release::open(o.write);
    ASSERT_EQ(back.tensors().size(), 3u) << to;
    EXPECT_EQ(back.passthrough().size(), 1u) << to;
    for (const auto& t : back.tensors()) {
      const io::release_tensor* src = nullptr;
      for (const auto& x : rel.tensors())
        if (x.name == t.name) src = &x;
      ASSERT_NE(src, nullptr) << t.name;
      const auto sv = rel.decode_rows(*src, 0, src->rows).values;
      const auto want = nf::quantize(o.target, sv, k_rows, k_cols);
      const auto got = back.decode_rows(t, 0, t.rows);
      EXPECT_EQ(got.codes, want.codes) << to << " " << t.name;
      EXPECT_EQ(got.values, want.dequant) << to << " " << t.name;
      // Same sums in the same order; NVFP4 -> NVFP4 re-quantizes the release to itself here
      // (every error 0: both sides +inf).
      const double want_db = sqnr_db(sv, want.dequant);
      for (const auto& rt : r.tensors)
        if (rt.name == t.name) {
          if (std::isinf(want_db)) EXPECT_EQ(rt.added.sqnr_db, want_db) << to;
          else EXPECT_NEAR(rt.added.sqnr_db, want_db, 1e-9) << to;
        }
    }
  }
}

// --write-layout bf16: the converted values rounded to bf16 (RNE), read back as stored.
TEST(convert, bf16_write_holds_the_converted_values_rounded_to_bf16) {
  const auto dir = scratch("bf16");
  const auto f = make_original(dir);
  make_release(f, nf::find_scheme("nvfp4").defaults, dir / "rel");
  const auto rel = io::release::open(dir / "rel");
  convert_options o;
  o.release = (dir / "rel").string();
  o.target_name = "mxfp4";
  o.target = nf::find_scheme("mxfp4").defaults;
  o.write = (dir / "out").string();
  o.write_layout = "bf16";
  (void)run_convert(o);
  const auto back = io::checkpoint::open(dir / "out" / "model.safetensors.index.json");
  for (const auto& t : rel.tensors()) {
    const auto want = nf::quantize(o.target, rel.decode_rows(t, 0, t.rows).values, k_rows, k_cols);
    const auto got = back.get(t.name).to_doubles();
    ASSERT_EQ(got.size(), want.dequant.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], nf::round_to(nf::format_id::m_bf16, want.dequant[i])) << t.name << " #" << i;
  }
  EXPECT_EQ(back.get("model.norm.weight").to_doubles(), io::checkpoint::open(dir / "rel" / "model.safetensors")
                                                            .get("model.norm.weight").to_doubles());
}

TEST(convert, refuses_unsafe_targets_and_layouts_by_name) {
  const auto dir = scratch("refuse");
  const auto f = make_original(dir);
  make_release(f, nf::find_scheme("nvfp4").defaults, dir / "rel");
  convert_options o;
  o.release = (dir / "rel").string();
  o.target_name = "fp8-block128";
  o.target = nf::find_scheme("fp8-block128").defaults;
  o.write = (dir / "rel").string();  // the release's own folder
  EXPECT_THROW((void)run_convert(o), numprobe::error);
  fs::create_directories(dir / "busy");
  std::ofstream(dir / "busy" / "x") << "x";
  o.write = (dir / "busy").string();
  EXPECT_THROW((void)run_convert(o), numprobe::error);
  // e4m3fnuz (MI300) has no public layout: bf16 only, and the report without --write.
  o.target.element = nf::format_id::m_e4m3fnuz;
  o.write = (dir / "fnuz").string();
  try {
    (void)run_convert(o);
    ADD_FAILURE() << "no error";
  } catch (const numprobe::error& e) {
    EXPECT_NE(std::string(e.what()).find("--write-layout"), std::string::npos) << e.what();
  }
  o.write_layout = "bf16";
  const auto r = run_convert(o);
  const auto back = io::checkpoint::open(dir / "fnuz" / "model.safetensors.index.json");
  EXPECT_EQ(back.tensors().size(), 4u);  // three weights in bf16, the norm as stored
  o.write.clear();
  o.write_layout.clear();
  const auto report = run_convert(o);
  EXPECT_EQ(report.tensors.size(), 3u);
  EXPECT_GT(report.tensors[0].added.sqnr_db, 10.0);  // e4m3 blocks hold NVFP4's values closely
  (void)r;
}

// An AWQ GEMM release of two [16, 64] weights (groups of 32), the second with scale `bad` in one
// group: a NaN f16 scale decodes to 32 NaN weights (docs/checkpoints.md, AWQ).
void make_awq_release(const fs::path& out, double bad) {
  fs::create_directories(out);
  const auto f16 = [](double v) { return static_cast<std::uint16_t>(nf::encode(nf::format_id::m_f16, v)); };
  static std::vector<std::uint32_t> qweight(64 * 2, 0x76543210u), qzeros(2 * 2, 0x88888888u);
  std::vector<std::vector<std::uint16_t>> scales(2, std::vector<std::uint16_t>(2 * 16, f16(0.01)));
  scales[1][21] = f16(bad);
  std::vector<io::tensor_to_write> ts;
  for (int w = 0; w < 2; ++w) {
    const std::string p = "model.layers." + std::to_string(w) + ".mlp.up_proj";
    ts.push_back({p + ".qweight", io::dtype::m_i32, {64, 2}, std::as_bytes(std::span(qweight))});
    ts.push_back({p + ".qzeros", io::dtype::m_i32, {2, 2}, std::as_bytes(std::span(qzeros))});
    ts.push_back({p + ".scales", io::dtype::m_f16, {2, 16}, std::as_bytes(std::span(scales[static_cast<std::size_t>(w)]))});
  }
  io::write_safetensors(out / "model.safetensors", std::move(ts));
  std::ofstream(out / "config.json") << R"({"quantization_config": {"quant_method": "awq", "version": "gemm", "bits": 4}})";
}

// --to dequant (issue 29 item 3): every tensor's decoded values as F32 under the release's own
// names and shapes; the passthrough norm's bf16/f32 values as F32. The expected values are the
// release's decode (io::release::decode_rows, tested against the layouts' rules in tests/io)
// rounded to float, and the count of values float32 cannot hold is checked against them.
TEST(convert, dequant_writes_every_tensor_as_f32_under_its_own_name) {
  const auto dir = scratch("dequant");
  const auto f = make_original(dir);
  make_release(f, nf::find_scheme("nvfp4").defaults, dir / "nv");
  make_awq_release(dir / "awq", 0.02);
  for (const char* which : {"nv", "awq"}) {
    const auto rel = io::release::open(dir / which);
    convert_options o;
    o.release = (dir / which).string();
    o.dequant = true;
    o.target_name = "dequant";
    o.write = (dir / (std::string(which) + "_out")).string();
    const auto r = run_convert(o);
    ASSERT_EQ(r.tensors.size(), rel.tensors().size()) << which;
    const auto back = io::checkpoint::open(fs::path(o.write) / "model.safetensors.index.json");
    for (std::size_t k = 0; k < rel.tensors().size(); ++k) {
      const auto& t = rel.tensors()[k];
      const auto want = rel.decode_rows(t, 0, t.rows).values;
      const auto v = back.get(t.name);
      EXPECT_EQ(v.dtype, io::dtype::m_f32) << t.name;
      EXPECT_EQ(v.shape, t.shape) << t.name;
      const auto got = v.to_doubles();
      ASSERT_EQ(got.size(), want.size()) << t.name;
      std::int64_t inexact = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], static_cast<double>(static_cast<float>(want[i]))) << t.name << " #" << i;
        inexact += static_cast<double>(static_cast<float>(want[i])) != want[i];
      }
      EXPECT_EQ(r.tensors[k].f32_inexact, inexact) << t.name;
      EXPECT_TRUE(r.tensors[k].as_values);
    }
    if (std::string(which) == "nv") {
      const auto norm = back.get("model.norm.weight");
      EXPECT_EQ(norm.dtype, io::dtype::m_f32);
      std::vector<double> want(f.norm.begin(), f.norm.end());
      EXPECT_EQ(norm.to_doubles(), want);
      // config.json keeps the model's fields, without a quantization_config: the values are plain.
      const auto cfg = nlohmann::json::parse(std::ifstream(fs::path(o.write) / "config.json"));
      EXPECT_EQ(cfg.value("model_type", ""), "llama");
      EXPECT_FALSE(cfg.contains("quantization_config"));
    }
  }
  // Without --write there is nothing to do: refused by name.
  convert_options o;
  o.release = (dir / "nv").string();
  o.dequant = true;
  try {
    (void)run_convert(o);
    ADD_FAILURE() << "dequant without --write ran";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("--write"), std::string::npos) << e.what();
  }
}

// NaN in a release (issue 27 item 6): counted, its tensor's added error NaN (no bound holds, never
// the inf SQNR of a NaN that dropped out of the sums); --write refuses it before creating OUT.
TEST(convert, nan_in_the_release_holds_no_bound_and_is_never_written) {
  const auto dir = scratch("nan");
  make_awq_release(dir / "rel", std::numeric_limits<double>::quiet_NaN());
  convert_options o;
  o.release = (dir / "rel").string();
  o.target_name = "mxfp4";
  o.target = nf::find_scheme("mxfp4").defaults;
  o.bounds.push_back(parse_bound("added_rel_rms<=0.5"));
  const auto r = run_convert(o);
  ASSERT_EQ(r.tensors.size(), 2u);
  EXPECT_EQ(r.tensors[0].nonfinite, 0);
  EXPECT_TRUE(std::isfinite(r.tensors[0].added.sqnr_db));
  EXPECT_EQ(r.tensors[1].nonfinite, 32);
  EXPECT_TRUE(std::isnan(r.tensors[1].added.sqnr_db));
  EXPECT_TRUE(std::isnan(r.tensors[1].added.rel_rms));
  EXPECT_EQ(r.nonfinite, 32);
  ASSERT_EQ(r.nonfinite_tensors.size(), 1u);
  EXPECT_EQ(r.nonfinite_tensors[0], "model.layers.1.mlp.up_proj.weight");
  EXPECT_TRUE(std::isnan(convert_metric(r, "added_rel_rms")));
  EXPECT_EQ(r.breaches.size(), 1u);
  result::check_result c;
  fill_result(r, c);
  EXPECT_EQ(c.outcome, result::status::m_fail);
  o.allow_nonfinite = true;
  o.bounds.clear();
  result::check_result allowed;
  fill_result(run_convert(o), allowed);
  EXPECT_NE(allowed.outcome, result::status::m_fail);  // reported, not gated
  o.write = (dir / "out").string();
  try {
    (void)run_convert(o);
    ADD_FAILURE() << "a release with NaN was written";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("model.layers.1.mlp.up_proj.weight: 32 decoded weights are NaN/Inf"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// --against must hold the weight itself: the same shape, a floating dtype (issue 27 item 6).
TEST(convert, an_original_of_another_shape_or_dtype_is_refused_by_name) {
  const auto dir = scratch("against");
  make_awq_release(dir / "rel", 0.02);
  std::vector<float> w(16 * 64, 0.01f);
  std::vector<std::int32_t> ints(16 * 64, 1);
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  io::write_safetensors(dir / "t.safetensors", {io::tensor_of(name, {64, 16}, w)});
  io::write_safetensors(dir / "i.safetensors",
                        {{name, io::dtype::m_i32, {16, 64}, std::as_bytes(std::span<const std::int32_t>(ints))}});
  io::write_safetensors(dir / "ok.safetensors", {io::tensor_of(name, {16, 64}, w)});
  convert_options o;
  o.release = (dir / "rel").string();
  o.target_name = "mxfp4";
  o.target = nf::find_scheme("mxfp4").defaults;
  for (const auto& [file, what] : {std::pair<std::string, std::string>{"t.safetensors", "shape [64, 16] (f32)"},
                                   {"i.safetensors", "dtype i32"}}) {
    o.against = (dir / file).string();
    try {
      (void)run_convert(o);
      ADD_FAILURE() << file << " accepted";
    } catch (const numprobe::error& e) {
      EXPECT_NE(std::string(e.what()).find(file + ":" + name + ": " + what), std::string::npos) << e.what();
    }
    release_scan_options so;
    so.release = o.release;
    so.against = o.against;
    EXPECT_THROW((void)run_release_scan(so), numprobe::error) << file;
  }
  o.against = (dir / "ok.safetensors").string();
  const auto r = run_convert(o);
  EXPECT_TRUE(r.tensors[0].release_vs_original.has_value());
}

}  // namespace
}  // namespace numprobe::probes
