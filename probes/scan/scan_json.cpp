// The scan probe's machine output: JSON (nested per tensor and per scheme) and CSV (one row
// per tensor and scheme). Non-finite numbers have no JSON form and are written as strings.
// The flush-aware and output-error columns (issue 17) come after the earlier ones, whose paths
// and CSV columns stay.
#include <cmath>
#include <fmt/format.h>

#include "numprobe/core/result.hpp"
#include "probes/scan/scan_probe.hpp"

namespace numprobe::probes {

using result::json_number;  // non-finite values in the schema's spelling
namespace {

nlohmann::json group_json(const scan_group& g) {
  return {{"key", g.key},           {"tensors", g.tensors},       {"elements", g.elements},
          {"sqnr_db", json_number(g.sqnr_db)}, {"rel_rms", json_number(g.rel_rms)}, {"flushed", g.flushed},
          {"clipped", g.clipped},   {"outlier_blocks", g.outlier_blocks},
          {"bytes", g.bytes},
          {"bits_per_param", g.elements ? g.bytes * 8.0 / static_cast<double>(g.elements) : 0.0},
          {"worst_tensor", g.worst_tensor}, {"worst_sqnr_db", json_number(g.worst_sqnr_db)}};
}

nlohmann::json result_json(const scan_scheme_result& r, std::int64_t cols, scan_rank rank_by) {
  const auto& b = r.worst.stats;
  nlohmann::json w = nullptr;
  if (!r.worst.flat.empty()) {
    w = {{"outlier", r.worst.outlier},
         {"row0", b.row0},
         {"col0", b.col0},
         {"rows", b.rows},
         {"cols", b.cols},
         {"amax", json_number(b.amax)},
         {"argmax", b.argmax < 0 ? nlohmann::json(nullptr)
                                 : nlohmann::json::array({b.argmax / cols, b.argmax % cols})},
         {"scale", json_number(b.scale)},
         {"scale_code", b.scale_code},
         {"flushed", b.flushed},
         {"clipped", b.clipped},
         {"elements", nlohmann::json::array()}};
    for (std::size_t i = 0; i < r.worst.flat.size(); ++i)
      w["elements"].push_back({{"at", {r.worst.flat[i] / cols, r.worst.flat[i] % cols}},
                               {"input", json_number(r.worst.input[i])},
                               {"dequant", json_number(r.worst.dequant[i])}});
  }
  return {{"scheme", r.scheme},
          {"conventions", r.conventions},
          {"elements", r.elements},
          {"sum_sq", json_number(r.sum_sq)},
          {"sum_sq_err", json_number(r.sum_sq_err)},
          {"sqnr_db", json_number(r.sqnr_db)},
          {"rel_rms", json_number(r.rel_rms)},
          {"max_abs", json_number(r.max_abs)},
          {"flushed", r.flushed},
          {"clipped", r.clipped},
          {"scale_underflow_blocks", r.scale_underflow_blocks},
          {"outlier_blocks", r.outlier_blocks},
          {"outlier_flushed", r.outlier_flushed},
          {"blocks", r.blocks},
          {"nonfinite_inputs", r.nonfinite_inputs},
          {"nonfinite_outputs", r.nonfinite_outputs},
          {"bits_per_element", r.bits_per_element},
          {"bytes", r.bytes},
          {"worst_block", w},
          {"flushed_frac", json_number(r.flushed_frac)},
          {"outlier_flushed_frac", json_number(r.outlier_flushed_frac)},
          {"bulk_rel_rms", json_number(r.bulk_rel_rms)},
          {"output_rel_rms", json_number(r.output_rel_rms)},
          {"rank_value", json_number(rank_value(r, rank_by))},
          {"output_sqnr_db", json_number(r.output_sqnr_db)},
          {"output_err", r.output_weighted ? json_number(r.output_sum_sq_err) : nlohmann::json(nullptr)},
          {"output_energy", r.output_weighted ? json_number(r.output_sum_sq) : nlohmann::json(nullptr)}};
}


}  // namespace

nlohmann::json to_json(const scan_report& r) {
  nlohmann::json j;
  j["checkpoint"] = r.options.checkpoint;
  j["schemes"] = r.options.schemes;
  j["filter"] = r.options.filter;
  j["rank_by"] = name(r.options.rank_by);
  j["bulk_percentile"] = static_cast<double>(k_bulk_percentile_tenths) / 10.0;
  j["act_stats"] = r.options.act_stats.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.options.act_stats);
  j["without_act_stats"] = r.without_act_stats;
  j["act_stats_unused"] = r.act_stats_unused;
  j["tensors"] = nlohmann::json::array();
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    const auto& t = r.tensors[i];
    nlohmann::json jt = {{"rank", i + 1},     {"name", t.name},       {"dtype", t.dtype},
                         {"shape", t.shape},  {"rows", t.rows},       {"cols", t.cols},
                         {"layer_type", t.layer_type},
                         {"layer", t.layer < 0 ? nlohmann::json(nullptr) : nlohmann::json(t.layer)},
                         {"bulk_below", json_number(t.bulk_below)},
                         {"act_stats", t.act_stats.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.act_stats)},
                         {"position", t.position},
                         {"results", nlohmann::json::array()}};
    for (const auto& s : t.results) jt["results"].push_back(result_json(s, t.cols, r.options.rank_by));
    j["tensors"].push_back(std::move(jt));
  }
  j["by_layer_type"] = nlohmann::json::object();
  j["by_depth"] = nlohmann::json::object();
  j["totals"] = nlohmann::json::object();
  for (std::size_t s = 0; s < r.totals.size(); ++s) {
    const std::string key = r.totals[s].key;
    auto& bt = j["by_layer_type"][key] = nlohmann::json::array();
    for (const auto& g : r.by_type[s]) bt.push_back(group_json(g));
    auto& bd = j["by_depth"][key] = nlohmann::json::array();
    for (const auto& g : r.by_depth[s]) bd.push_back(group_json(g));
    j["totals"][key] = group_json(r.totals[s]);
  }
  j["source_bytes"] = r.source_bytes;
  j["skipped"] = r.skipped;
  j["seconds"] = r.seconds;
  // A shard's document says which share it holds and what the merge needs that the rest does not
  // carry (the ranked table's length); a whole scan's has no such key.
  if (r.options.shard_count > 1)
    j["shard"] = {{"index", r.options.shard_index}, {"count", r.options.shard_count}, {"top", r.options.top}};
  return j;
}

result::table data_table(const scan_report& r) {
  result::table out{"tensors and schemes (full precision)",
                    {"rank", "tensor", "dtype", "rows", "cols", "layer_type", "layer", "scheme", "sqnr_db", "rel_rms",
                     "max_abs", "flushed", "clipped", "scale_underflow_blocks", "outlier_blocks", "outlier_flushed",
                     "blocks", "bits_per_element", "bytes", "flushed_frac", "outlier_flushed_frac",
                     "bulk_rel_rms", "bulk_below", "output_rel_rms", "rank_value", "output_sqnr_db", "output_err"},
                    {}, true};
  auto g = [](double v) { return fmt::format("{:.17g}", v); };
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    const auto& t = r.tensors[i];
    for (const auto& s : t.results)
      out.rows.push_back({std::to_string(i + 1), t.name, t.dtype, std::to_string(t.rows), std::to_string(t.cols),
                          t.layer_type, t.layer < 0 ? std::string() : std::to_string(t.layer), s.scheme,
                          g(s.sqnr_db), g(s.rel_rms), g(s.max_abs), std::to_string(s.flushed),
                          std::to_string(s.clipped), std::to_string(s.scale_underflow_blocks),
                          std::to_string(s.outlier_blocks), std::to_string(s.outlier_flushed),
                          std::to_string(s.blocks), g(s.bits_per_element), g(s.bytes), g(s.flushed_frac),
                          g(s.outlier_flushed_frac), g(s.bulk_rel_rms),
                          g(t.bulk_below), g(s.output_rel_rms), g(rank_value(s, r.options.rank_by)),
                          g(s.output_sqnr_db), s.output_weighted ? g(s.output_sum_sq_err) : std::string()});
  }
  return out;
}

}  // namespace numprobe::probes
