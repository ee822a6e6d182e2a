// A scan document read back (scan_from_json, the inverse of to_json in scan_json.cpp), for
// `numprobe merge` of scan shards: every field the reports and the ranking read, exact.
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result.hpp"
#include "probes/scan/scan_probe.hpp"

namespace numprobe::probes {
namespace {

using nlohmann::json;
using result::read_number;

// A number field that to_json may have written as "nan"/"inf"; a missing or mistyped one is an
// error (read_number alone would read it as NaN and the merged report would hide it).
double num(const json& j, const char* key) {
  const auto& v = j.at(key);
  return v.is_string() ? read_number(v) : v.get<double>();  // get throws on null, bool, ...: not a number
}

scan_worked_block worst_from_json(const json& w, std::int64_t cols) {
  scan_worked_block b;
  if (w.is_null()) return b;
  b.outlier = w.at("outlier").get<bool>();
  b.stats.row0 = w.at("row0").get<std::int64_t>();
  b.stats.col0 = w.at("col0").get<std::int64_t>();
  b.stats.rows = w.at("rows").get<std::int64_t>();
  b.stats.cols = w.at("cols").get<std::int64_t>();
  b.stats.amax = num(w, "amax");
  const auto& am = w.at("argmax");
  b.stats.argmax = am.is_null() ? -1 : am.at(0).get<std::int64_t>() * cols + am.at(1).get<std::int64_t>();
  b.stats.scale = num(w, "scale");
  b.stats.scale_code = w.at("scale_code").get<std::uint32_t>();
  b.stats.flushed = w.at("flushed").get<std::int32_t>();
  b.stats.clipped = w.at("clipped").get<std::int32_t>();
  for (const auto& e : w.at("elements")) {
    b.flat.push_back(e.at("at").at(0).get<std::int64_t>() * cols + e.at("at").at(1).get<std::int64_t>());
    b.input.push_back(num(e, "input"));
    b.dequant.push_back(num(e, "dequant"));
  }
  return b;
}

scan_scheme_result result_from_json(const json& j, std::int64_t cols) {
  scan_scheme_result r;
  r.scheme = j.at("scheme").get<std::string>();
  r.conventions = j.at("conventions").get<std::string>();
  r.elements = j.at("elements").get<std::int64_t>();
  r.sum_sq = num(j, "sum_sq");
  r.sum_sq_err = num(j, "sum_sq_err");
  r.sqnr_db = num(j, "sqnr_db");
  r.rel_rms = num(j, "rel_rms");
  r.max_abs = num(j, "max_abs");
  for (auto [key, field] : {std::pair{"flushed", &r.flushed}, {"clipped", &r.clipped},
                            {"scale_underflow_blocks", &r.scale_underflow_blocks}, {"outlier_blocks", &r.outlier_blocks},
                            {"outlier_flushed", &r.outlier_flushed}, {"blocks", &r.blocks},
                            {"nonfinite_inputs", &r.nonfinite_inputs}, {"nonfinite_outputs", &r.nonfinite_outputs}})
    *field = j.at(key).get<std::int64_t>();
  r.bits_per_element = num(j, "bits_per_element");
  r.bytes = num(j, "bytes");
  r.worst = worst_from_json(j.at("worst_block"), cols);
  r.flushed_frac = num(j, "flushed_frac");
  r.outlier_flushed_frac = num(j, "outlier_flushed_frac");
  r.bulk_rel_rms = num(j, "bulk_rel_rms");
  r.output_rel_rms = num(j, "output_rel_rms");
  r.output_sqnr_db = num(j, "output_sqnr_db");
  r.output_weighted = !j.at("output_err").is_null();
  if (r.output_weighted) {
    r.output_sum_sq_err = num(j, "output_err");
    r.output_sum_sq = num(j, "output_energy");
  }
  return r;
}

std::string string_or_empty(const json& v) { return v.is_null() ? std::string() : v.get<std::string>(); }

}  // namespace

scan_report scan_from_json(const json& j, const std::string& place) {
  try {
    scan_report r;
    auto& o = r.options;
    o.checkpoint = j.at("checkpoint").get<std::string>();
    o.schemes = j.at("schemes").get<std::vector<std::string>>();
    o.filter = j.at("filter").get<std::string>();
    o.rank_by = parse_scan_rank(j.at("rank_by").get<std::string>(), place + ": rank_by");
    o.act_stats = string_or_empty(j.at("act_stats"));
    if (j.contains("shard")) {
      const auto& s = j.at("shard");
      o.shard_index = s.at("index").get<int>();
      o.shard_count = s.at("count").get<int>();
      o.top = s.at("top").get<std::size_t>();
    }
    r.without_act_stats = j.at("without_act_stats").get<std::vector<std::string>>();
    r.act_stats_unused = j.at("act_stats_unused").get<std::size_t>();
    for (const auto& jt : j.at("tensors")) {
      scan_tensor t;
      t.name = jt.at("name").get<std::string>();
      t.dtype = jt.at("dtype").get<std::string>();
      t.shape = jt.at("shape").get<std::vector<std::uint64_t>>();
      t.rows = jt.at("rows").get<std::int64_t>();
      t.cols = jt.at("cols").get<std::int64_t>();
      if (t.cols <= 0) throw_input_error(place, fmt::format("tensor '{}' has {} columns", t.name, t.cols));
      t.layer_type = jt.at("layer_type").get<std::string>();
      t.layer = jt.at("layer").is_null() ? -1 : jt.at("layer").get<int>();
      t.bulk_below = num(jt, "bulk_below");
      t.act_stats = string_or_empty(jt.at("act_stats"));
      t.position = jt.at("position").get<std::int64_t>();
      for (const auto& jr : jt.at("results")) t.results.push_back(result_from_json(jr, t.cols));
      if (t.results.size() != o.schemes.size())
        throw_input_error(place, fmt::format("tensor '{}' has {} results for {} schemes", t.name, t.results.size(),
                                             o.schemes.size()));
      r.tensors.push_back(std::move(t));
    }
    r.source_bytes = num(j, "source_bytes");
    r.bytes_read = r.source_bytes;
    r.skipped = j.at("skipped").get<std::vector<std::string>>();
    r.seconds = num(j, "seconds");
    return r;
  } catch (const json::exception& e) {
    throw_input_error(place, fmt::format("not a scan document: {}", e.what()));
  }
}

}  // namespace numprobe::probes
