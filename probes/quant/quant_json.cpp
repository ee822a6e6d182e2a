// The quant probe's machine output. Numbers go in as doubles; the CLI's writer prints them with
// full precision. Non-finite values have no JSON number, so they are written as strings.
#include <cmath>

#include "numprobe/core/result.hpp"
#include "probes/quant/quant_probe.hpp"

namespace numprobe::probes {

using result::json_number;  // non-finite values in the schema's spelling
namespace {

nlohmann::json block_json(const quant_report& r, std::int64_t index) {
  const auto& q = r.result;
  const auto& b = q.blocks[static_cast<std::size_t>(index)];
  nlohmann::json j = {{"index", index},
                      {"row0", b.row0},
                      {"col0", b.col0},
                      {"rows", b.rows},
                      {"cols", b.cols},
                      {"amax", json_number(b.amax)},
                      {"argmax", b.argmax},
                      {"scale", json_number(b.scale)},
                      {"scale_code", b.scale_code},
                      {"flushed", b.flushed},
                      {"outlier_flushed", r.outlier_flushes[static_cast<std::size_t>(index)]},
                      {"clipped", b.clipped},
                      {"nonfinite", b.nonfinite},
                      {"scale_underflow", b.scale_underflow}};
  if (q.config.kind == formats::scheme_kind::m_asym) j["zero_point"] = b.zero_point;
  return j;
}

}  // namespace

nlohmann::json to_json(const quant_report& r) {
  const auto& m = r.metrics;
  const auto& c = r.result.config;
  nlohmann::json j;
  j["case"] = r.case_id;
  j["input"] = r.options.input.empty() ? nlohmann::json(std::string(name(r.options.dist)))
                                       : nlohmann::json(r.options.input);
  j["shape"] = r.input_shape;
  j["format"] = formats::name(c.element);
  j["scheme"] = {{"name", r.options.scheme_name},
                 {"kind", formats::name(c.kind)},
                 {"scale_format", formats::name(c.scale_format)},
                 {"block", {r.result.grid.block_rows, r.result.grid.block_cols}},
                 {"grid", {r.result.grid.grid_rows, r.result.grid.grid_cols}},
                 {"axis", c.axis},
                 {"rule", formats::name(c.rule)},
                 {"rounding", c.round == formats::rounding::m_nearest_even ? "rne"
                              : c.round == formats::rounding::m_toward_zero ? "rtz"
                                                                            : "stochastic"},
                 {"overflow", c.over == formats::overflow::m_saturate ? "saturate"
                              : c.over == formats::overflow::m_nan   ? "nan"
                                                                     : "inf"}};
  j["conventions"] = nlohmann::json::object();
  for (const auto& [axis, value] : formats::convention_values(c)) j["conventions"][std::string(axis)] = value;
  if (c.kind == formats::scheme_kind::m_nvfp4) j["tensor_scale"] = json_number(r.result.tensor_scale);
  if (r.gemm.on) {
    const auto& g = r.gemm;
    j["gemm"] = {{"model", g.model},
                 {"instruction", g.instruction},
                 {"tokens", g.tokens},
                 {"n", g.n},
                 {"k", g.k},
                 {"k_block", g.k_block},
                 {"instructions_per_block", g.instructions_per_block},
                 {"acc_promote", g.promote},
                 {"acc_fma", g.acc_fma},
                 {"acc_rel_rms", json_number(g.acc_rel_rms)},
                 {"fp32_acc_rel_rms", json_number(g.fp32_acc_rel_rms)},
                 {"acc_ratio", json_number(g.acc_ratio())},
                 {"rel_rms", json_number(g.rel_rms)},
                 {"fp32_rel_rms", json_number(g.fp32_rel_rms)},
                 {"acc_max_abs", json_number(g.acc_max_abs)},
                 {"nonfinite", g.nonfinite}};
  }
  j["elements"] = m.elements;
  j["sqnr_db"] = json_number(m.sqnr_db);
  j["rel_rms"] = json_number(m.rel_rms);
  j["max_abs"] = json_number(m.max_abs);
  j["max_rel"] = json_number(m.max_rel);
  j["flushed"] = m.flushed;
  j["clipped"] = m.clipped;
  j["scale_underflow"] = m.scale_underflow_blocks;
  j["nan_inputs"] = m.nan_inputs;
  j["inf_inputs"] = m.inf_inputs;
  j["nonfinite_outputs"] = m.nonfinite_outputs;
  j["blocks"] = m.blocks;
  j["outlier_blocks"] = m.outlier_blocks;
  j["outlier_flushed"] = m.outlier_flushed;
  j["bits_per_element"] = m.bits_per_element;
  j["worst_blocks"] = nlohmann::json::array();
  for (auto b : r.worst_blocks) j["worst_blocks"].push_back(block_json(r, b));
  if (r.worked.index >= 0) {
    auto w = block_json(r, r.worked.index);
    w["elements"] = r.worked.flat;
    w["input"] = nlohmann::json::array();
    w["dequant"] = nlohmann::json::array();
    for (double v : r.worked.input) w["input"].push_back(json_number(v));
    for (double v : r.worked.dequant) w["dequant"].push_back(json_number(v));
    w["codes"] = r.worked.codes;
    w["truncated"] = r.worked.truncated;
    j["worked_block"] = w;
  }
  if (!r.device_check.is_null()) j["device_check"] = r.device_check;
  j["breaches"] = nlohmann::json::array();
  for (const auto& b : r.breaches) j["breaches"].push_back({{"bound", b.bound}, {"measured", json_number(b.measured)}});
  j["seconds"] = r.seconds;
  return j;
}

}  // namespace numprobe::probes
