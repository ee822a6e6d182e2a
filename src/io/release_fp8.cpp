// The fp8 layouts of released checkpoints (release_layouts.hpp): compressed-tensors
// float-quantized, ModelOpt FP8 and DeepSeek-V3. Each rule is cited in docs/checkpoints.md.
//
// One decoder serves both: e4m3fn with a scale per Br x Bc tile (per tensor and per channel are
// the tiles rows x cols and 1 x cols).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>

#include "numprobe/formats/format.hpp"
#include "src/io/release_float_common.hpp"

namespace numprobe::io::detail {
namespace {

using fid = formats::format_id;

bool ct_fp8_config(const json& qc) { return ct_format(qc) == "float-quantized"; }
bool deepseek_config(const json& qc) {
  return str_at(qc, "quant_method") == "fp8" && qc.contains("weight_block_size");
}

// ModelOpt's FP8 algorithms, from hf_quant_config.json's quantization.quant_algo or
// config.json's quantization_config (quant_method modelopt): the weight scale's strategy.
std::string modelopt_fp8_strategy(const json& qc) {
  std::string algo;
  if (str_at(qc, "quant_method") == "modelopt") algo = str_at(qc, "quant_algo");
  else if (qc.contains("quantization") && qc["quantization"].is_object())
    algo = str_at(qc["quantization"], "quant_algo");
  std::transform(algo.begin(), algo.end(), algo.begin(), [](unsigned char ch) { return std::toupper(ch); });
  if (algo == "FP8") return "tensor";
  if (algo == "FP8_PER_CHANNEL_PER_TOKEN") return "channel";
  if (algo == "FP8_PB_WO") return "block";
  return "";
}
bool modelopt_fp8_config(const json& qc) { return !modelopt_fp8_strategy(qc).empty(); }
// Names alone cannot tell ModelOpt FP8 from compressed-tensors float-quantized (weight e4m3fn
// plus weight_scale, dequant = code * scale in both): without a config they read as ct-fp8.
bool modelopt_fp8_names(const checkpoint&) { return false; }

bool ct_fp8_names(const checkpoint& ck) {
  return has_pair(ck, ".weight", dtype::m_e4m3fn, ".weight_scale");
}
bool deepseek_names(const checkpoint& ck) {
  return has_pair(ck, ".weight", dtype::m_e4m3fn, ".weight_scale_inv");
}

// ---- e4m3fn with Br x Bc tile scales -------------------------------------------------

release_tensor fp8_tensor(release_layout l, const entry& w, const entry& s, std::int64_t br,
                          std::int64_t bc, const char* scheme_name) {
  release_tensor t;
  t.name = w.name;
  t.layout = l;
  t.shape = w.shape;
  t.rows = static_cast<std::int64_t>(w.shape[0]);
  t.cols = static_cast<std::int64_t>(w.shape[1]);
  t.scheme_name = scheme_name;
  t.scheme = formats::find_scheme(scheme_name).defaults;
  if (t.scheme.kind == formats::scheme_kind::m_block2d) {
    t.scheme.block_rows = br;
    t.scheme.block_cols = bc;
    t.row_align = br;
  }
  if (s.dtype == dtype::m_bf16) t.scheme.scale_format = fid::m_bf16;
  if (s.dtype == dtype::m_f16) t.scheme.scale_format = fid::m_f16;
  t.record = {{"layout", std::string(name(l))},
              {"tensors", {{"weight", source(w)}, {"scale", source(s)}}},
              {"block_rows", br},
              {"block_cols", bc},
              {"rules", json::array({"dequant = e4m3fn * scale over " + std::to_string(br) + " x " +
                                     std::to_string(bc) + " tiles"})}};
  return t;
}

void check_fp8_pair(const entry& w, const entry& s) {
  expect_dtype(w, dtype::m_e4m3fn, "the layout stores e4m3fn (F8_E4M3) weights");
  if (w.shape.size() != 2)
    throw_input_error(w.name, "shape " + shape_text(w.shape) + ", expected a 2-D [out, in] weight");
  if (s.dtype != dtype::m_f32 && s.dtype != dtype::m_bf16 && s.dtype != dtype::m_f16)
    throw_input_error(s.name, "dtype " + std::string(name(s.dtype)) + ", scales are f32/bf16/f16");
}

std::vector<std::uint64_t> tile_grid(const entry& w, std::int64_t br, std::int64_t bc) {
  return {static_cast<std::uint64_t>(ceil_div(static_cast<std::int64_t>(w.shape[0]), br)),
          static_cast<std::uint64_t>(ceil_div(static_cast<std::int64_t>(w.shape[1]), bc))};
}

// Each e4m3fn `X.weight` with its required scale `X.weight<suffix>`, checked; make(w, s)
// gives its release_tensor. Every other tensor goes to passthrough.
template <class F>
void group_fp8(const checkpoint& ck, const std::string& suffix, const std::string& why,
               std::vector<release_tensor>& out, std::vector<std::string>& passthrough, F&& make) {
  const name_index ix(ck);
  std::map<std::string, bool> used;
  for (const auto& w : ck.tensors()) {
    if (!w.name.ends_with(".weight") || w.dtype != dtype::m_e4m3fn) continue;
    const auto& s = require(ix, w.name + suffix, why);
    check_fp8_pair(w, s);
    out.push_back(make(w, s));
    used[w.name] = used[s.name] = true;
  }
  pass_rest(ck, used, passthrough);
}

void group_deepseek(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                    std::vector<std::string>& passthrough) {
  std::int64_t br = 128, bc = 128;
  if (qc.is_object() && qc.contains("weight_block_size")) {
    parse_tile(qc["weight_block_size"], "quantization_config.weight_block_size", br, bc);
  }
  const bool b128 = br == 128 && bc == 128;
  group_fp8(ck, "_scale_inv", "DeepSeek-V3 fp8 stores one scale per block", out, passthrough,
            [&](const entry& w, const entry& s) {
              expect_shape(s, tile_grid(w, br, bc), "[ceil(M/" + std::to_string(br) +
                                                        "), ceil(N/" + std::to_string(bc) + ")]");
              return fp8_tensor(release_layout::m_deepseek_fp8, w, s, br, bc,
                                b128 ? "fp8-block128" : "block2d");
            });
}

// compressed-tensors float-quantized: the weights' strategy and block from config_groups
// (the first group whose weights are 8-bit float), or "" when there is none.
std::string ct_strategy(const json& qc, std::int64_t& br, std::int64_t& bc) {
  if (!qc.is_object() || !qc.contains("config_groups") || !qc["config_groups"].is_object())
    return "";
  for (const auto& [k, g] : qc["config_groups"].items()) {
    if (!g.is_object() || !g.contains("weights") || !g["weights"].is_object()) continue;
    const auto& w = g["weights"];
    if (str_at(w, "type") != "float") continue;
    const std::string st = str_at(w, "strategy");
    if (st == "block") {
      parse_tile(w.contains("block_structure") ? w["block_structure"] : json(),
                 "quantization_config.config_groups." + k + ".weights.block_structure", br, bc);
    }
    if (st != "tensor" && st != "channel" && st != "block")
      throw_input_error("quantization_config.config_groups." + k + ".weights.strategy",
                        "'" + st + "': float-quantized weights are per tensor, channel or block");
    return st;
  }
  return "";
}

// One float-quantized weight: the strategy from the config, else from the scale's shape.
release_tensor ct_fp8_tensor(release_layout l, const entry& w, const entry& s, const std::string& config_strategy,
                             std::int64_t cbr, std::int64_t cbc) {
  const auto rows = w.shape[0];
  const std::uint64_t n = checked_element_count(s.shape, s.name);
  std::string st = config_strategy;
  if (st.empty())  // no config: the scale's shape tells
    st = n == 1 ? "tensor" : (s.shape == std::vector<std::uint64_t>{rows, 1} ? "channel" : "block");
  release_tensor t;
  if (st == "tensor") {
    if (n != 1)
      throw_input_error(s.name, "shape " + shape_text(s.shape) + ", strategy tensor has one scale");
    t = fp8_tensor(l, w, s, std::max<std::int64_t>(rows, 1),
                   std::max<std::int64_t>(w.shape[1], 1), "fp8-tensor");
  } else if (st == "channel") {
    if (s.shape != std::vector<std::uint64_t>{rows, 1} && s.shape != std::vector<std::uint64_t>{rows})
      expect_shape(s, {rows, 1}, "strategy channel: one scale per output row");
    t = fp8_tensor(l, w, s, 1, std::max<std::int64_t>(w.shape[1], 1),
                   "fp8-channel");
  } else {
    expect_shape(s, tile_grid(w, cbr, cbc), "strategy block " + std::to_string(cbr) + "x" +
                                                std::to_string(cbc));
    t = fp8_tensor(l, w, s, cbr, cbc,
                   cbr == 128 && cbc == 128 ? "fp8-block128" : "block2d");
  }
  t.record["strategy"] = st;
  return t;
}

void group_ct_fp8(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                  std::vector<std::string>& passthrough) {
  std::int64_t cbr = 128, cbc = 128;
  const std::string config_strategy = ct_strategy(qc, cbr, cbc);
  group_fp8(ck, "_scale", "float-quantized stores weight_scale", out, passthrough,
            [&](const entry& w, const entry& s) {
              return ct_fp8_tensor(release_layout::m_ct_fp8, w, s, config_strategy, cbr, cbc);
            });
}

// ModelOpt FP8: the strategy from the algorithm (FP8_PB_WO's blocks are 128 x 128), else (a
// forced --layout without a config) from the scale's shape.
void group_modelopt_fp8(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                        std::vector<std::string>& passthrough) {
  const std::string strategy = qc.is_null() ? "" : modelopt_fp8_strategy(qc);
  group_fp8(ck, "_scale", "ModelOpt FP8 stores weight_scale", out, passthrough,
            [&](const entry& w, const entry& s) {
              return ct_fp8_tensor(release_layout::m_modelopt_fp8, w, s, strategy, 128, 128);
            });
}

release_slab decode_fp8(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                        std::int64_t r1) {
  const auto& rec = t.record;
  const auto wv = ck.get(rec["tensors"]["weight"]["name"].get<std::string>());
  const auto sv = ck.get(rec["tensors"]["scale"]["name"].get<std::string>());
  const std::int64_t br = rec["block_rows"].get<std::int64_t>();
  const std::int64_t bc = rec["block_cols"].get<std::int64_t>();
  const std::int64_t cols = t.cols, gc = ceil_div(cols, bc);
  const std::int64_t g0 = r0 / br, g1 = r1 == r0 ? g0 : ceil_div(r1, br);

  release_slab out;
  out.r0 = r0;
  out.r1 = r1;
  out.cols = cols;
  const auto ns = static_cast<std::size_t>((g1 - g0) * gc);
  out.scales.resize(ns);
  out.scale_codes.resize(ns);
  sv.decode(static_cast<std::uint64_t>(g0 * gc), out.scales);
  const int width = bits(sv.dtype) / 8;
  for (std::size_t i = 0; i < ns; ++i) {
    std::uint32_t code = 0;
    std::memcpy(&code, sv.bytes.data() + (static_cast<std::size_t>(g0 * gc) + i) * width, width);
    out.scale_codes[i] = code;  // little-endian hosts (safetensors is little-endian)
    const double s = out.scales[i];
    if (!std::isfinite(s) || s < 0)
      throw_input_error(sv.name, "scale " + std::to_string(s) + " at block " +
                                     std::to_string(static_cast<std::int64_t>(i) + g0 * gc) +
                                     ": must be finite and >= 0");
  }
  const auto* wb = reinterpret_cast<const std::uint8_t*>(wv.bytes.data());
  double lut[256];
  for (unsigned c = 0; c < 256; ++c) lut[c] = formats::decode(fid::m_e4m3fn, c);
  const auto n = static_cast<std::size_t>((r1 - r0) * cols);
  out.values.resize(n);
  out.codes.resize(n);
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>((r - r0) * cols + c);
      const std::uint8_t code = wb[r * cols + c];
      out.codes[i] = code;
      // e4m3 (4 significant bits) x a 24-bit scale: exact in double. NaN codes decode to NaN.
      out.values[i] = lut[code] * out.scales[static_cast<std::size_t>((r / br - g0) * gc + c / bc)];
    }
  return out;
}

}  // namespace

void add_fp8_layouts(std::vector<layout_reader>& out) {
  out.push_back({release_layout::m_ct_fp8, ct_fp8_config, ct_fp8_names, group_ct_fp8, decode_fp8});
  out.push_back({release_layout::m_deepseek_fp8, deepseek_config, deepseek_names, group_deepseek,
                 decode_fp8});
  out.push_back({release_layout::m_modelopt_fp8, modelopt_fp8_config, modelopt_fp8_names, group_modelopt_fp8,
                 decode_fp8});
}

}  // namespace numprobe::io::detail
