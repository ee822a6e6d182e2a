// The integer layouts of released checkpoints (src/io/release_int.cpp): AWQ GEMM, GPTQ v1/v2,
// compressed-tensors pack-quantized int4. Each checkpoint is built here from the layout's
// published rule (docs/checkpoints.md cites it), with a packer written in this file, and the
// expected values are computed here from that rule: W[o, i] = (q - z) s. Every comparison is
// exact (the products of a small integer and an f16/bf16 scale are exact doubles).
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <random>

#include "io/io_test_util.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/io/release.hpp"
#include "numprobe/io/safetensors.hpp"
#include "src/io/release_layouts.hpp"

namespace numprobe::io {
namespace {

using nlohmann::json;
using detail::layout_reader;
using fid = formats::format_id;

const layout_reader& reader(release_layout id) {
  static const std::vector<layout_reader> all = [] {
    std::vector<layout_reader> v;
    detail::add_int_layouts(v);
    return v;
  }();
  for (const auto& r : all)
    if (r.id == id) return r;
  throw std::logic_error("no int reader");
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A weight [out, in] as the rule sees it: uint4 codes q, per-(row, group) zero z and scale s,
// and the group of every input channel.
struct int4_weight {
  std::int64_t out = 0, in = 0, group = 0, groups = 0;
  std::vector<int> q, z;      // q [out, in] in 0..15, z [out, groups]
  std::vector<double> s;      // [out, groups]
  std::vector<int> group_of;  // [in]
  fid scale_format = fid::m_f16;
  [[nodiscard]] double expected(std::int64_t o, std::int64_t i) const {
    const auto b = static_cast<std::size_t>(o * groups + group_of[static_cast<std::size_t>(i)]);
    return (q[static_cast<std::size_t>(o * in + i)] - z[b]) * s[b];
  }
};

int4_weight random_weight(std::int64_t out, std::int64_t in, std::int64_t group, std::uint64_t seed,
                          fid scale_format = fid::m_f16) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> nib(0, 15);
  std::uniform_real_distribution<double> mag(1e-3, 0.25);
  int4_weight w{out, in, group, ceil_div(in, group), {}, {}, {}, {}, scale_format};
  for (std::int64_t k = 0; k < out * in; ++k) w.q.push_back(nib(rng));
  for (std::int64_t k = 0; k < out * w.groups; ++k) {
    w.z.push_back(nib(rng));
    w.s.push_back(formats::round_to(scale_format, mag(rng)));
  }
  for (std::int64_t i = 0; i < in; ++i) w.group_of.push_back(static_cast<int>(i / group));
  return w;
}

// Owns the bytes of the tensors until they are written.
struct writer {
  std::deque<std::vector<std::byte>> store;
  std::vector<tensor_to_write> tensors;
  template <class T>
  void add(std::string name, io::dtype d, std::vector<std::uint64_t> shape, const std::vector<T>& v) {
    auto& b = store.emplace_back(v.size() * sizeof(T));
    std::memcpy(b.data(), v.data(), b.size());
    tensors.push_back({std::move(name), d, std::move(shape), b});
  }
  void add_scales(std::string name, fid f, std::vector<std::uint64_t> shape,
                  const std::vector<double>& v) {
    if (f == fid::m_f32) {
      add(std::move(name), io::dtype::m_f32, std::move(shape), std::vector<float>(v.begin(), v.end()));
      return;
    }
    std::vector<std::uint16_t> bits;
    for (double x : v) bits.push_back(static_cast<std::uint16_t>(formats::encode(f, x)));
    add(std::move(name), f == fid::m_f16 ? io::dtype::m_f16 : io::dtype::m_bf16, std::move(shape), bits);
  }
  std::filesystem::path write(const std::filesystem::path& dir, const json& qc = nullptr) {
    const auto p = dir / "model.safetensors";
    // Through add(): tensor_of over a temporary vector would leave a dangling span.
    add("model.norm.weight", io::dtype::m_f32, {4}, std::vector<float>{1, 2, 3, 4});
    write_safetensors(p, tensors);
    if (!qc.is_null()) {
      std::ofstream(dir / "config.json") << json{{"quantization_config", qc}}.dump();
    }
    return p;
  }
};

std::uint32_t word_of(const std::function<int(int)>& nibble_k) {
  std::uint32_t w = 0;
  for (int k = 0; k < 8; ++k) w |= static_cast<std::uint32_t>(nibble_k(k) & 0xF) << (4 * k);
  return w;
}

// AutoAWQ gemm.py from_linear: qweight [in, out/8], nibble k of word j = column 8j + order[k].
constexpr int k_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
void add_awq(writer& wr, const std::string& p, const int4_weight& w) {
  std::vector<std::int32_t> qw, qz;
  const std::int64_t words = w.out / 8;
  for (std::int64_t i = 0; i < w.in; ++i)
    for (std::int64_t j = 0; j < words; ++j)
      qw.push_back(static_cast<std::int32_t>(
          word_of([&](int k) { return w.q[static_cast<std::size_t>((8 * j + k_order[k]) * w.in + i)]; })));
  std::vector<double> sc;
  for (std::int64_t g = 0; g < w.groups; ++g) {
    for (std::int64_t j = 0; j < words; ++j)
      qz.push_back(static_cast<std::int32_t>(
          word_of([&](int k) { return w.z[static_cast<std::size_t>((8 * j + k_order[k]) * w.groups + g)]; })));
    for (std::int64_t o = 0; o < w.out; ++o) sc.push_back(w.s[static_cast<std::size_t>(o * w.groups + g)]);
  }
  const auto in = std::uint64_t(w.in), gs = std::uint64_t(w.groups);
  wr.add(p + ".qweight", io::dtype::m_i32, {in, std::uint64_t(words)}, qw);
  wr.add(p + ".qzeros", io::dtype::m_i32, {gs, std::uint64_t(words)}, qz);
  wr.add_scales(p + ".scales", w.scale_format, {gs, std::uint64_t(w.out)}, sc);
}

// AutoGPTQ qlinear_cuda_old.py pack: qweight [ceil(in/8), out] along in; qzeros along out,
// v1 stores z - 1; g_idx [in].
void add_gptq(writer& wr, const std::string& p, const int4_weight& w, int zero_offset,
              bool with_g_idx = true) {
  std::vector<std::int32_t> qw, qz, gi(w.group_of.begin(), w.group_of.end());
  for (std::int64_t r = 0; r < ceil_div(w.in, 8); ++r)
    for (std::int64_t o = 0; o < w.out; ++o)
      qw.push_back(static_cast<std::int32_t>(word_of([&](int k) {
        const std::int64_t i = 8 * r + k;
        return i < w.in ? w.q[static_cast<std::size_t>(o * w.in + i)] : 0;
      })));
  std::vector<double> sc;
  const std::int64_t zw = ceil_div(w.out, 8);
  for (std::int64_t g = 0; g < w.groups; ++g) {
    for (std::int64_t j = 0; j < zw; ++j)
      qz.push_back(static_cast<std::int32_t>(word_of([&](int k) {
        const std::int64_t o = 8 * j + k;
        return o < w.out ? w.z[static_cast<std::size_t>(o * w.groups + g)] - zero_offset : 0;
      })));
    for (std::int64_t o = 0; o < w.out; ++o) sc.push_back(w.s[static_cast<std::size_t>(o * w.groups + g)]);
  }
  const auto gs = std::uint64_t(w.groups);
  wr.add(p + ".qweight", io::dtype::m_i32, {std::uint64_t(ceil_div(w.in, 8)), std::uint64_t(w.out)}, qw);
  wr.add(p + ".qzeros", io::dtype::m_i32, {gs, std::uint64_t(zw)}, qz);
  wr.add_scales(p + ".scales", w.scale_format, {gs, std::uint64_t(w.out)}, sc);
  if (with_g_idx) wr.add(p + ".g_idx", io::dtype::m_i32, {std::uint64_t(w.in)}, gi);
}

// compressed-tensors pack_to_int32: signed q stored as q + 8 (= our uint4 q), 8 per int32 along
// the last axis, low bits first; asymmetric zero points packed the same way along out (dim 0).
void add_ct(writer& wr, const std::string& p, const int4_weight& w, bool asym) {
  std::vector<std::int32_t> packed, zp;
  const std::int64_t words = ceil_div(w.in, 8);
  for (std::int64_t o = 0; o < w.out; ++o)
    for (std::int64_t j = 0; j < words; ++j)
      packed.push_back(static_cast<std::int32_t>(word_of([&](int k) {
        const std::int64_t i = 8 * j + k;
        return i < w.in ? w.q[static_cast<std::size_t>(o * w.in + i)] : 8;  // pad: signed 0
      })));
  for (std::int64_t r = 0; r < ceil_div(w.out, 8); ++r)
    for (std::int64_t g = 0; g < w.groups; ++g)
      zp.push_back(static_cast<std::int32_t>(word_of([&](int k) {
        const std::int64_t o = 8 * r + k;
        return o < w.out ? w.z[static_cast<std::size_t>(o * w.groups + g)] : 8;
      })));
  const auto outf = std::uint64_t(w.out), gs = std::uint64_t(w.groups);
  wr.add(p + ".weight_packed", io::dtype::m_i32, {outf, std::uint64_t(words)}, packed);
  wr.add_scales(p + ".weight_scale", w.scale_format, {outf, gs}, w.s);
  wr.add(p + ".weight_shape", io::dtype::m_i64, {2}, std::vector<std::int64_t>{w.out, w.in});
  if (asym) wr.add(p + ".weight_zero_point", io::dtype::m_i32, {std::uint64_t(ceil_div(w.out, 8)), gs}, zp);
}

json awq_config(std::int64_t g) {
  return {{"quant_method", "awq"}, {"version", "gemm"}, {"bits", 4}, {"group_size", g}, {"zero_point", true}};
}
json gptq_config(std::int64_t g, const char* fmt) {
  json qc = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", g}, {"desc_act", false}, {"sym", false}};
  if (fmt) qc["checkpoint_format"] = fmt;
  return qc;
}
json ct_config(std::int64_t g, bool sym) {
  return {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"format", "pack-quantized"},
                               {"weights", {{"num_bits", 4}, {"type", "int"}, {"symmetric", sym},
                                            {"strategy", "group"}, {"group_size", g}}}}}}}};
}

struct opened {
  checkpoint ck;
  std::vector<release_tensor> tensors;
  std::vector<std::string> passthrough;
};
opened group(release_layout id, const std::filesystem::path& p, const json& qc) {
  opened o{checkpoint::open(p), {}, {}};
  reader(id).group(o.ck, qc, o.tensors, o.passthrough);
  return o;
}

// Every element, code, block scale and zero against the rule; then slabs against the whole.
void expect_decodes(release_layout id, const opened& o, const int4_weight& w, bool signed_codes) {
  ASSERT_EQ(o.tensors.size(), 1u);
  const auto& t = o.tensors[0];
  ASSERT_EQ(t.rows, w.out);
  ASSERT_EQ(t.cols, w.in);
  const auto all = reader(id).decode(o.ck, t, 0, w.out);
  ASSERT_EQ(all.values.size(), std::size_t(w.out * w.in));
  for (std::int64_t r = 0; r < w.out; ++r)
    for (std::int64_t i = 0; i < w.in; ++i) {
      const auto k = static_cast<std::size_t>(r * w.in + i);
      ASSERT_EQ(all.values[k], w.expected(r, i)) << "row " << r << " col " << i;
      // signed int4: formats::encode's two's complement nibble of q - 8
      ASSERT_EQ(all.codes[k], signed_codes ? std::uint32_t(w.q[k] - 8) & 0xFu : std::uint32_t(w.q[k]));
    }
  ASSERT_EQ(all.scales, w.s);
  for (std::size_t b = 0; b < w.s.size(); ++b)
    ASSERT_EQ(all.scale_codes[b], formats::encode(w.scale_format, w.s[b]));
  if (!signed_codes) {
    EXPECT_EQ(all.zero_points, w.z);
  }
  std::vector<double> joined;
  const std::int64_t cuts[] = {0, 1, 7, w.out / 2 + 3, w.out};
  for (std::size_t c = 0; c + 1 < std::size(cuts); ++c) {
    const auto s = reader(id).decode(o.ck, t, cuts[c], cuts[c + 1]);
    EXPECT_EQ(s.r0, cuts[c]);
    joined.insert(joined.end(), s.values.begin(), s.values.end());
  }
  EXPECT_EQ(joined, all.values);
  EXPECT_EQ(o.passthrough, std::vector<std::string>{"model.norm.weight"});
}

TEST(ReleaseInt, AwqGemmDecodesByItsOrder) {
  const auto dir = test::scratch_dir();
  const auto w = random_weight(40, 384, 128, 11);
  writer wr;
  add_awq(wr, "model.layers.0.mlp.up_proj", w);
  const auto p = wr.write(dir);
  const auto o = group(release_layout::m_awq, p, awq_config(128));
  EXPECT_EQ(o.tensors[0].name, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(o.tensors[0].scheme_name, "int4-awq");
  EXPECT_EQ(o.tensors[0].scheme.group, 128);
  expect_decodes(release_layout::m_awq, o, w, false);
  EXPECT_TRUE(reader(release_layout::m_awq).names_match(o.ck));
  EXPECT_FALSE(reader(release_layout::m_gptq_v1).names_match(o.ck));
  EXPECT_TRUE(reader(release_layout::m_awq).config_matches(awq_config(128)));
  EXPECT_FALSE(reader(release_layout::m_gptq_v1).config_matches(awq_config(128)));
}

TEST(ReleaseInt, GptqV1AndV2DifferByOneScaleStep) {
  // in = 296: not a multiple of G (a partial last group); out = 20 pads the last qzeros word.
  const auto w = random_weight(20, 296, 128, 12);
  for (int v = 1; v <= 2; ++v) {
    const auto dir = test::scratch_dir() / std::to_string(v);
    std::filesystem::create_directories(dir);
    const auto id = v == 1 ? release_layout::m_gptq_v1 : release_layout::m_gptq_v2;
    auto wv = w;
    if (v == 1)  // v1 cannot store z = 0 (z - 1 = -1 wraps to 15, read back as 16)
      for (int& z : wv.z) z = std::max(z, 1);
    writer wr;
    add_gptq(wr, "m.q_proj", wv, v == 1 ? 1 : 0);
    const auto o = group(id, wr.write(dir), gptq_config(128, v == 1 ? "gptq" : "gptq_v2"));
    EXPECT_EQ(o.tensors[0].scheme_name, "int4-awq");
    EXPECT_FALSE(o.tensors[0].record.at("act_order").get<bool>());
    expect_decodes(id, o, wv, false);
    // The same file read as the other version: every value moves by exactly one scale step.
    auto t = o.tensors[0];
    t.layout = v == 1 ? release_layout::m_gptq_v2 : release_layout::m_gptq_v1;
    const auto a = reader(id).decode(o.ck, o.tensors[0], 0, w.out);
    const auto b = reader(t.layout).decode(o.ck, t, 0, w.out);
    for (std::int64_t r = 0; r < w.out; ++r)
      for (std::int64_t i = 0; i < w.in; ++i) {
        const auto k = static_cast<std::size_t>(r * w.in + i);
        const double step = w.s[static_cast<std::size_t>(r * w.groups + i / 128)];
        ASSERT_EQ(b.values[k] - a.values[k], v == 1 ? step : -step);
      }
  }
  EXPECT_TRUE(reader(release_layout::m_gptq_v1).config_matches(gptq_config(128, nullptr)));
  EXPECT_FALSE(reader(release_layout::m_gptq_v2).config_matches(gptq_config(128, nullptr)));
  EXPECT_TRUE(reader(release_layout::m_gptq_v2).config_matches(gptq_config(128, "gptq_v2")));
  EXPECT_FALSE(reader(release_layout::m_gptq_v1).config_matches(gptq_config(128, "gptq_v2")));
}

TEST(ReleaseInt, GptqNoConfigIsV1ByNames) {
  const auto dir = test::scratch_dir();
  auto w = random_weight(16, 256, 64, 13);
  for (int& z : w.z) z = std::max(z, 1);
  writer wr;
  add_gptq(wr, "m.o_proj", w, 1);
  const auto o = group(release_layout::m_gptq_v1, wr.write(dir), nullptr);
  EXPECT_TRUE(reader(release_layout::m_gptq_v1).names_match(o.ck));
  EXPECT_FALSE(reader(release_layout::m_awq).names_match(o.ck));
  EXPECT_EQ(o.tensors[0].scheme.group, 64);  // from the shapes
  EXPECT_NE(o.tensors[0].record.dump().find("v1 assumed"), std::string::npos);
  expect_decodes(release_layout::m_gptq_v1, o, w, false);
}

TEST(ReleaseInt, GptqActOrderDecodesThroughGIdx) {
  const auto dir = test::scratch_dir();
  auto w = random_weight(16, 256, 64, 14);
  std::vector<int> perm(256);
  for (int i = 0; i < 256; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(15));
  for (int i = 0; i < 256; ++i) w.group_of[i] = perm[i] / 64;
  writer wr;
  add_gptq(wr, "m.k_proj", w, 0);
  const auto o = group(release_layout::m_gptq_v2, wr.write(dir), gptq_config(64, "gptq_v2"));
  EXPECT_TRUE(o.tensors[0].record.at("act_order").get<bool>());
  EXPECT_EQ(o.tensors[0].scheme_name, "");  // not contiguous groups: identify skips it
  expect_decodes(release_layout::m_gptq_v2, o, w, false);
}

TEST(ReleaseInt, CompressedTensorsSymmetricAndAsymmetric) {
  for (bool asym : {false, true}) {
    const auto dir = test::scratch_dir() / (asym ? "asym" : "sym");
    std::filesystem::create_directories(dir);
    // in = 200: weight_shape carries it, the last word is padded; out = 20: zeros pad too.
    auto w = random_weight(20, 200, 64, asym ? 16 : 17, fid::m_bf16);
    if (!asym) std::fill(w.z.begin(), w.z.end(), 8);
    writer wr;
    add_ct(wr, "m.gate_proj", w, asym);
    const auto o = group(release_layout::m_ct_int4, wr.write(dir), ct_config(64, !asym));
    EXPECT_EQ(o.tensors[0].scheme_name, asym ? "int4-awq" : "int4-sym");
    EXPECT_EQ(o.tensors[0].scheme.scale_format, fid::m_bf16);
    expect_decodes(release_layout::m_ct_int4, o, w, !asym);
    EXPECT_TRUE(reader(release_layout::m_ct_int4).names_match(o.ck));
  }
  EXPECT_TRUE(reader(release_layout::m_ct_int4).config_matches(ct_config(64, true)));
}

// numprobe's own quantization, packed into each layout, reads back as the same codes, scales
// and zeros.
TEST(ReleaseInt, NumprobeQuantizationReadsBack) {
  const std::int64_t out = 32, in = 256;
  std::mt19937_64 rng(18);
  std::normal_distribution<double> nd(0.0, 0.05);
  std::vector<double> x(out * in);
  for (double& v : x) v = nd(rng);
  for (const char* scheme : {"int4-awq", "int4-g128"}) {
    const auto q = formats::quantize(formats::find_scheme(scheme).defaults, x, out, in);
    int4_weight w{out, in, 128, 2, {}, {}, {}, {}, fid::m_f16};
    const bool asym = std::string(scheme) == "int4-awq";
    for (auto c : q.codes) w.q.push_back(asym ? int(c) : int(c ^ 8u));  // i4 code -> q + 8
    for (const auto& b : q.blocks) {
      w.z.push_back(asym ? b.zero_point : 8);
      w.s.push_back(b.scale);
    }
    for (std::int64_t i = 0; i < in; ++i) w.group_of.push_back(int(i / 128));
    const std::vector<release_layout> ids =
        asym ? std::vector{release_layout::m_awq, release_layout::m_gptq_v2, release_layout::m_ct_int4}
             : std::vector{release_layout::m_ct_int4};
    for (auto id : ids) {
      const auto dir = test::scratch_dir() / (std::string(scheme) + std::to_string(int(id)));
      std::filesystem::create_directories(dir);
      writer wr;
      json qc;
      if (id == release_layout::m_awq) add_awq(wr, "m.p", w), qc = awq_config(128);
      if (id == release_layout::m_gptq_v2) add_gptq(wr, "m.p", w, 0), qc = gptq_config(128, "gptq_v2");
      if (id == release_layout::m_ct_int4) add_ct(wr, "m.p", w, asym), qc = ct_config(128, !asym);
      const auto o = group(id, wr.write(dir), qc);
      EXPECT_EQ(o.tensors[0].scheme_name, scheme);
      const auto s = reader(id).decode(o.ck, o.tensors[0], 0, out);
      EXPECT_EQ(s.codes, q.codes) << int(id);
      EXPECT_EQ(s.values, q.dequant) << int(id);
      ASSERT_EQ(s.scale_codes.size(), q.blocks.size());
      for (std::size_t b = 0; b < q.blocks.size(); ++b) {
        EXPECT_EQ(s.scale_codes[b], q.blocks[b].scale_code);
        if (asym) {
          EXPECT_EQ(s.zero_points[b], q.blocks[b].zero_point);
        }
      }
    }
  }
}

void expect_input_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// One malformed checkpoint per case: `edit` changes the writer before it writes.
void expect_malformed(release_layout id, const json& qc, const int4_weight& w,
                      const std::function<void(writer&)>& build, const std::string& needle) {
  const auto dir = test::scratch_dir() / std::to_string(std::hash<std::string>{}(needle + qc.dump()));
  std::filesystem::create_directories(dir);
  writer wr;
  build(wr);
  (void)w;
  const auto p = wr.write(dir);
  expect_input_error([&] { (void)group(id, p, qc); }, needle);
}

TEST(ReleaseInt, MalformedExitsTwoNamingTheTensor) {
  const auto w = random_weight(16, 256, 128, 19);
  const auto awq = release_layout::m_awq, v1 = release_layout::m_gptq_v1;
  auto drop = [](writer& wr, const std::string& name) {
    std::erase_if(wr.tensors, [&](const tensor_to_write& t) { return t.name == name; });
  };
  // qweight packs 8 fewer outputs than scales has
  expect_malformed(awq, awq_config(128), w, [&](writer& wr) {
    auto w2 = random_weight(8, 256, 128, 20);
    add_awq(wr, "m.p", w2);
    drop(wr, "m.p.scales");
    wr.add_scales("m.p.scales", fid::m_f16, {2, 16}, std::vector<double>(32, 0.5));
  }, "m.p.qweight");
  // in = 192 is not a multiple of G = 128 (AWQ GEMM requires it)
  expect_malformed(awq, awq_config(128), w, [&](writer& wr) { add_awq(wr, "m.p", random_weight(16, 192, 128, 21)); },
                   "m.p.scales");
  expect_malformed(awq, awq_config(128), w, [&](writer& wr) { add_awq(wr, "m.p", w); drop(wr, "m.p.qzeros"); },
                   "m.p.qzeros");
  json bits3 = awq_config(128);
  bits3["bits"] = 3;
  expect_malformed(awq, bits3, w, [&](writer& wr) { add_awq(wr, "m.p", w); }, "quantization_config.bits");
  // g_idx one short, and a g_idx value past the last group
  expect_malformed(v1, gptq_config(128, "gptq"), w, [&](writer& wr) {
    add_gptq(wr, "m.p", w, 1, false);
    wr.add("m.p.g_idx", io::dtype::m_i32, {255}, std::vector<std::int32_t>(255, 0));
  }, "m.p.g_idx");
  expect_malformed(v1, gptq_config(128, "gptq"), w, [&](writer& wr) {
    add_gptq(wr, "m.p", w, 1, false);
    std::vector<std::int32_t> g(256, 0);
    g[200] = 2;
    wr.add("m.p.g_idx", io::dtype::m_i32, {256}, g);
  }, "m.p.g_idx");
  expect_malformed(v1, gptq_config(128, "gptq"), w, [&](writer& wr) { add_gptq(wr, "m.p", w, 1); drop(wr, "m.p.scales"); },
                   "m.p.scales");
  // compressed-tensors: weight_packed not the packing of weight_shape; a missing zero point
  expect_malformed(release_layout::m_ct_int4, ct_config(128, true), w, [&](writer& wr) {
    add_ct(wr, "m.p", w, false);
    drop(wr, "m.p.weight_shape");
    wr.add("m.p.weight_shape", io::dtype::m_i64, {2}, std::vector<std::int64_t>{16, 300});
  }, "m.p.weight_packed");
  expect_malformed(release_layout::m_ct_int4, ct_config(128, false), w,
                   [&](writer& wr) { add_ct(wr, "m.p", w, false); }, "m.p.weight_zero_point");
  json ct8 = ct_config(128, true);
  ct8["config_groups"]["group_0"]["weights"]["num_bits"] = 8;
  expect_malformed(release_layout::m_ct_int4, ct8, w, [&](writer& wr) { add_ct(wr, "m.p", w, false); },
                   "num_bits");
}

}  // namespace
}  // namespace numprobe::io
