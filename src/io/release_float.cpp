// The fp4 layouts of released checkpoints (release_layouts.hpp): NVFP4 (ModelOpt,
// compressed-tensors) and MXFP4 (compressed-tensors, gpt-oss); the fp8 layouts are in
// release_fp8.cpp. Each rule is cited in docs/checkpoints.md.
//
// One decoder serves the four layouts: packed e2m1 with a scale per 1 x B block. group()
// writes into each release_tensor's record the source tensor names and the numbers decode()
// needs, so decode reads them back from the record rather than from the file's names again.
#include <algorithm>
#include <cmath>
#include <string>

#include "numprobe/formats/format.hpp"
#include "src/io/release_float_common.hpp"

namespace numprobe::io::detail {
namespace {

using fid = formats::format_id;

bool modelopt_config(const json& qc) {
  if (str_at(qc, "quant_method") == "modelopt") return str_at(qc, "quant_algo") == "NVFP4";
  // hf_quant_config.json: {"producer": {"name": "modelopt"}, "quantization": {"quant_algo"}}
  if (qc.contains("quantization") && qc["quantization"].is_object())
    return str_at(qc["quantization"], "quant_algo") == "NVFP4";
  return false;
}
bool ct_nvfp4_config(const json& qc) { return ct_format(qc) == "nvfp4-pack-quantized"; }
bool ct_mxfp4_config(const json& qc) { return ct_format(qc) == "mxfp4-pack-quantized"; }
bool gptoss_config(const json& qc) { return str_at(qc, "quant_method") == "mxfp4"; }

bool modelopt_names(const checkpoint& ck) {
  return has_pair(ck, ".weight", dtype::m_u8, ".weight_scale", dtype::m_e4m3fn);
}
bool ct_nvfp4_names(const checkpoint& ck) {
  return has_pair(ck, ".weight_packed", dtype::m_u8, ".weight_scale", dtype::m_e4m3fn);
}
bool ct_mxfp4_names(const checkpoint& ck) {
  return has_pair(ck, ".weight_packed", dtype::m_u8, ".weight_scale", dtype::m_u8);
}
bool gptoss_names(const checkpoint& ck) {
  return has_pair(ck, "_blocks", dtype::m_u8, "_scales", dtype::m_u8) ||
         has_pair(ck, ".blocks", dtype::m_u8, ".scales", dtype::m_u8);
}

// ---- packed e2m1 with 1 x B block scales ----------------------------------------------

struct fp4_parts {
  const entry* packed = nullptr;
  const entry* scale = nullptr;      // e4m3fn (NVFP4) or u8 e8m0 codes (MX)
  std::vector<std::uint64_t> shape;  // logical; the last dim is the packed one
  int block = 16;
};

// Checks packed [..., K/2] against scales [..., ceil(K/B)] and fills the tensor's geometry.
release_tensor fp4_tensor(release_layout l, const std::string& base, const fp4_parts& p,
                          const char* scheme_name) {
  const auto& ps = p.packed->shape;
  const std::int64_t k = static_cast<std::int64_t>(p.shape.back());
  if (k % 2 != 0)
    throw_input_error(p.packed->name, "odd K = " + std::to_string(k) +
                                          ": two e2m1 codes per byte need an even K");
  if (ps.back() * 2 != p.shape.back())
    throw_input_error(p.packed->name, "packed size " + shape_text(ps) + " does not hold K = " +
                                          std::to_string(k) + " codes, two per byte");
  std::vector<std::uint64_t> want(p.shape.begin(), p.shape.end() - 1);
  want.push_back(static_cast<std::uint64_t>(ceil_div(k, p.block)));
  expect_shape(*p.scale, want, "one scale per " + std::to_string(p.block) + " weights along K");
  release_tensor t;
  t.name = base;
  t.layout = l;
  t.shape = p.shape;
  (void)checked_element_count(p.shape, base);
  t.cols = k;
  t.rows = static_cast<std::int64_t>(checked_element_count(
      std::span<const std::uint64_t>(p.shape.data(), p.shape.size() - 1), base));
  t.scheme_name = scheme_name;
  t.scheme = formats::find_scheme(scheme_name).defaults;
  t.record = {{"layout", std::string(name(l))},
              {"tensors", {{"packed", source(*p.packed)}, {"scale", source(*p.scale)}}},
              {"block", p.block},
              {"rules", json::array({"two e2m1 codes per byte, low nibble first"})}};
  return t;
}

// The e2m1 value of a nibble (the OCP MX table; numprobe's e2m1 code is the nibble itself).
double e2m1_value(unsigned nibble) { return formats::decode(fid::m_e2m1, nibble); }

release_slab decode_fp4(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                        std::int64_t r1) {
  const auto& rec = t.record;
  const auto pv = ck.get(rec["tensors"]["packed"]["name"].get<std::string>());
  const auto sv = ck.get(rec["tensors"]["scale"]["name"].get<std::string>());
  const bool mx = sv.dtype == dtype::m_u8;
  const std::int64_t block = rec["block"].get<std::int64_t>();
  const std::int64_t cols = t.cols, nb = ceil_div(cols, block), half = cols / 2;
  // NVFP4: ModelOpt multiplies by weight_scale_2; compressed-tensors divides by
  // weight_global_scale (one rounding in double; exact when 1/g is, see the record).
  const double s_mul = rec.value("tensor_scale_multiply", 1.0);
  const double s_div = rec.value("global_scale", 1.0);

  release_slab out;
  out.r0 = r0;
  out.r1 = r1;
  out.cols = cols;
  out.tensor_scale = rec.value("tensor_scale", 1.0);
  const auto rows = static_cast<std::size_t>(r1 - r0);
  out.values.resize(rows * static_cast<std::size_t>(cols));
  out.codes.resize(out.values.size());
  out.scales.resize(rows * static_cast<std::size_t>(nb));
  out.scale_codes.resize(out.scales.size());
  const auto* pb = reinterpret_cast<const std::uint8_t*>(pv.bytes.data());
  const auto* sb = reinterpret_cast<const std::uint8_t*>(sv.bytes.data());
  double lut[16];
  for (unsigned c = 0; c < 16; ++c) lut[c] = e2m1_value(c);

  for (std::int64_t r = r0; r < r1; ++r) {
    const std::size_t ro = static_cast<std::size_t>(r - r0);
    for (std::int64_t j = 0; j < nb; ++j) {
      const std::uint8_t code = sb[r * nb + j];
      double s = 0;
      if (mx) {
        if (code == 0xFF)
          throw_input_error(sv.name, "e8m0 scale 0xFF (NaN) at row " + std::to_string(r) +
                                         ", block " + std::to_string(j));
        s = std::ldexp(1.0, static_cast<int>(code) - 127);
      } else {
        s = formats::decode(fid::m_e4m3fn, code);
        if (std::isnan(s))
          throw_input_error(sv.name, "e4m3 block scale is NaN at row " + std::to_string(r) +
                                         ", block " + std::to_string(j));
      }
      out.scales[ro * nb + j] = s;
      out.scale_codes[ro * nb + j] = code;
      const std::int64_t c1 = std::min(cols, (j + 1) * block);
      for (std::int64_t c = j * block; c < c1; ++c) {
        const std::uint8_t byte = pb[r * half + c / 2];
        const unsigned nib = (c % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
        const std::size_t i = ro * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c);
        out.codes[i] = nib;
        out.values[i] = lut[nib] * s * s_mul / s_div;  // e2m1 x e4m3 x f32: exact in double
      }
    }
  }
  return out;
}

// The record's tensor scale of an NVFP4 layout.
void set_modelopt_scale(release_tensor& t, double s2) {
  t.record["tensor_scale"] = s2;
  t.record["tensor_scale_multiply"] = s2;
  t.record["rules"].push_back("dequant = e2m1 * weight_scale * weight_scale_2");
}

void set_ct_global(release_tensor& t, double g) {
  const float inv = static_cast<float>(1.0 / g);
  // inv * g is exact in double (24 x 24 bits): 1/g is exact in fp32 iff the product is 1.
  const bool exact = static_cast<double>(inv) * g == 1.0;
  t.record["global_scale"] = g;
  t.record["tensor_scale"] = static_cast<double>(inv);
  t.record["tensor_scale_exact"] = exact;
  t.record["rules"].push_back(
      exact ? "dequant = e2m1 * weight_scale / weight_global_scale; tensor_scale = 1/global "
              "(exact in fp32)"
            : "dequant = e2m1 * weight_scale / weight_global_scale, one rounding in double; "
              "tensor_scale = fp32(1/global) is NOT exact, the values are not e2m1*s_b*s_t");
}

void group_modelopt(const checkpoint& ck, const json&, std::vector<release_tensor>& out,
                    std::vector<std::string>& passthrough) {
  const name_index ix(ck);
  std::map<std::string, bool> used;
  for (const auto& e : ck.tensors()) {
    if (!e.name.ends_with(".weight")) continue;
    if (e.dtype != dtype::m_u8) {
      // A weight beside e4m3 block scales is an NVFP4 weight whatever its dtype: F32 or int8 codes
      // "kept as stored" would pass the scales on as orphans (and convert would copy them).
      const entry* s = ix.find(e.name + "_scale");
      if (s != nullptr && s->dtype == dtype::m_e4m3fn)
        throw_input_error(e.name, "dtype " + std::string(name(e.dtype)) + " beside the e4m3 block scales " + s->name +
                                      ": ModelOpt NVFP4 stores packed uint8 fp4 codes (U8, two e2m1 per byte)");
      continue;
    }
    if (e.shape.size() != 2)
      throw_input_error(e.name, "shape " + shape_text(e.shape) + ", ModelOpt NVFP4 packs [out, in/2]");
    const auto& s = require(ix, e.name + "_scale", "ModelOpt NVFP4 stores an e4m3 scale per 16");
    const auto& s2 = require(ix, e.name + "_scale_2", "ModelOpt NVFP4 stores a per-tensor fp32 scale");
    expect_dtype(s, dtype::m_e4m3fn, "ModelOpt NVFP4 block scales are e4m3 (F8_E4M3)");
    release_tensor t = fp4_tensor(release_layout::m_modelopt_nvfp4, e.name,
                                  {&e, &s, {e.shape[0], e.shape[1] * 2}, 16}, "nvfp4");
    t.record["tensors"]["tensor_scale"] = source(s2);
    set_modelopt_scale(t, positive_scalar(ck, s2, "weight_scale_2"));
    used[e.name] = used[s.name] = used[s2.name] = true;
    if (const entry* in = ix.find(strip(e.name, ".weight") + ".input_scale")) {
      t.record["tensors"]["input_scale"] = source(*in);
      t.record["input_scale"] = positive_scalar(ck, *in, "input_scale");
      used[in->name] = true;
    }
    out.push_back(std::move(t));
  }
  pass_rest(ck, used, passthrough);
}

// compressed-tensors' optional weight_shape: the logical [out, in], checked against the packing.
std::vector<std::uint64_t> ct_logical_shape(const checkpoint& ck, const name_index& ix,
                                            const entry& packed, std::map<std::string, bool>& used) {
  if (packed.shape.size() != 2)
    throw_input_error(packed.name, "shape " + shape_text(packed.shape) + ", packs [out, in/2]");
  std::vector<std::uint64_t> shape{packed.shape[0], packed.shape[1] * 2};
  if (const entry* ws = ix.find(strip(packed.name, "_packed") + "_shape")) {
    if (checked_element_count(ws->shape, ws->name) != 2)
      throw_input_error(ws->name, "shape " + shape_text(ws->shape) + ", weight_shape holds [out, in]");
    double v[2];
    ck.get(ws->name).decode(0, v);
    for (double d : v)
      if (!(d >= 0 && d < 0x1p62)) throw_input_error(ws->name, "not a dimension: " + std::to_string(d));
    shape = {static_cast<std::uint64_t>(v[0]), static_cast<std::uint64_t>(v[1])};
    if (shape[0] != packed.shape[0])
      throw_input_error(packed.name, "packed size " + shape_text(packed.shape) +
                                         " does not match weight_shape " + shape_text(shape));
    used[ws->name] = true;
  }
  return shape;
}

template <bool NV>
void group_ct_fp4(const checkpoint& ck, const json&, std::vector<release_tensor>& out,
                  std::vector<std::string>& passthrough) {
  const name_index ix(ck);
  std::map<std::string, bool> used;
  const char* fmt = NV ? "nvfp4-pack-quantized" : "mxfp4-pack-quantized";
  for (const auto& e : ck.tensors()) {
    if (!e.name.ends_with(".weight_packed")) continue;
    expect_dtype(e, dtype::m_u8, std::string(fmt) + " packs two e2m1 per uint8");
    const std::string stem = strip(e.name, "_packed");  // "X.weight"
    const auto& s = require(ix, stem + "_scale", std::string(fmt) + " stores block scales");
    expect_dtype(s, NV ? dtype::m_e4m3fn : dtype::m_u8,
                 NV ? "nvfp4 block scales are F8_E4M3" : "mxfp4 scales are e8m0 codes in uint8");
    const auto shape = ct_logical_shape(ck, ix, e, used);
    release_tensor t = fp4_tensor(NV ? release_layout::m_ct_nvfp4 : release_layout::m_ct_mxfp4,
                                  stem, {&e, &s, shape, NV ? 16 : 32}, NV ? "nvfp4" : "mxfp4");
    used[e.name] = used[s.name] = true;
    if constexpr (NV) {
      const auto& g = require(ix, stem + "_global_scale", "nvfp4-pack-quantized divides by it");
      t.record["tensors"]["global_scale"] = source(g);
      set_ct_global(t, positive_scalar(ck, g, "weight_global_scale"));
      used[g.name] = true;
      if (const entry* in = ix.find(strip(stem, ".weight") + ".input_global_scale")) {
        t.record["tensors"]["input_global_scale"] = source(*in);
        t.record["input_global_scale"] = positive_scalar(ck, *in, "input_global_scale");
        used[in->name] = true;
      }
    } else {
      t.record["rules"].push_back("dequant = e2m1 * 2^(weight_scale - 127), blocks of 32");
    }
    out.push_back(std::move(t));
  }
  // Block scales of this layout's dtype with no packed codes beside them: the weight is stored
  // as something else (F32, int8) and would be "kept as stored" with orphan scales.
  for (const auto& e : ck.tensors()) {
    if (!e.name.ends_with(".weight_scale") || used.contains(e.name) || e.dtype != (NV ? dtype::m_e4m3fn : dtype::m_u8))
      continue;
    const std::string stem = strip(e.name, "_scale");  // "X.weight"
    const entry* w = ix.find(stem);
    throw_input_error(w ? w->name : e.name,
                      w ? "dtype " + std::string(name(w->dtype)) + " beside the block scales " + e.name + ": " + fmt +
                              " stores packed uint8 fp4 codes in " + stem + "_packed (U8, two e2m1 per byte)"
                        : std::string("block scales without ") + stem + "_packed, the packed uint8 fp4 codes (" + fmt + ")");
  }
  pass_rest(ck, used, passthrough);
}

void group_gptoss(const checkpoint& ck, const json&, std::vector<release_tensor>& out,
                  std::vector<std::string>& passthrough) {
  const name_index ix(ck);
  std::map<std::string, bool> used;
  for (const auto& e : ck.tensors()) {
    const bool us = e.name.ends_with("_blocks"), dot = e.name.ends_with(".blocks");
    if (!us && !dot) continue;
    const std::string base = strip(e.name, "_blocks");  // same length as ".blocks"
    const auto& s = require(ix, base + (us ? "_scales" : ".scales"), "gpt-oss MXFP4 stores e8m0 scales");
    expect_dtype(e, dtype::m_u8, "gpt-oss MXFP4 blocks are uint8");
    expect_dtype(s, dtype::m_u8, "gpt-oss MXFP4 scales are e8m0 codes in uint8");
    if (e.shape.size() < 3 || e.shape.back() != 16)
      throw_input_error(e.name, "shape " + shape_text(e.shape) +
                                    ", gpt-oss MXFP4 blocks are [..., G, 16] (32 fp4 in 16 bytes)");
    std::vector<std::uint64_t> logical(e.shape.begin(), e.shape.end() - 2);
    std::uint64_t k = 0;
    if (__builtin_mul_overflow(e.shape[e.shape.size() - 2], std::uint64_t{32}, &k))
      throw_input_error(e.name, "G x 32 overflows");
    logical.push_back(k);
    // The blocks [..., G, 16] are [..., K/2] in memory; the scales must be [..., G].
    fp4_parts p{&e, &s, logical, 32};
    entry flat = e;
    flat.shape = logical;
    flat.shape.back() = k / 2;
    p.packed = &flat;
    release_tensor t = fp4_tensor(release_layout::m_gptoss_mxfp4, base, p, "mxfp4");
    t.record["tensors"]["packed"] = source(e);
    t.record["rules"].push_back("dequant = FP4_VALUES[nibble] * 2^(scale - 127)");
    used[e.name] = used[s.name] = true;
    out.push_back(std::move(t));
  }
  pass_rest(ck, used, passthrough);
}

}  // namespace

void add_float_layouts(std::vector<layout_reader>& out) {
  out.push_back({release_layout::m_modelopt_nvfp4, modelopt_config, modelopt_names, group_modelopt,
                 decode_fp4});
  out.push_back({release_layout::m_ct_nvfp4, ct_nvfp4_config, ct_nvfp4_names, group_ct_fp4<true>,
                 decode_fp4});
  out.push_back({release_layout::m_ct_mxfp4, ct_mxfp4_config, ct_mxfp4_names, group_ct_fp4<false>,
                 decode_fp4});
  out.push_back({release_layout::m_gptoss_mxfp4, gptoss_config, gptoss_names, group_gptoss,
                 decode_fp4});
  add_fp8_layouts(out);
}

}  // namespace numprobe::io::detail
