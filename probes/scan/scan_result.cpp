// scan's result model: what `numprobe scan` and a scenario's scan check report.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/core/result_gates.hpp"
#include "probes/scan/scan_probe.hpp"

namespace numprobe::probes {
namespace {

// Per-tensor metrics of the primary scheme; `total.*` over all scanned tensors.
const std::vector<std::string> k_tensor_metrics_list = {"sqnr_db", "rel_rms", "max_abs", "flushed",
                                                   "clipped", "scale_underflow", "outlier_blocks",
                                                   "outlier_flushed", "nonfinite", "flushed_frac",
                                                   "outlier_flushed_frac", "bulk_rel_rms"};
const std::vector<std::string> k_total_metrics_list = {"total.sqnr_db", "total.rel_rms", "total.flushed",
                                                  "total.clipped", "total.outlier_blocks",
                                                  "bits_per_element", "tensors"};

std::optional<double> tensor_metric(const scan_tensor& t, const std::string& n) {
  const auto& r = t.results.front();
  if (n == "sqnr_db") return r.sqnr_db;
  if (n == "rel_rms") return r.rel_rms;
  if (n == "max_abs") return r.max_abs;
  if (n == "flushed") return static_cast<double>(r.flushed);
  if (n == "clipped") return static_cast<double>(r.clipped);
  if (n == "scale_underflow") return static_cast<double>(r.scale_underflow_blocks);
  if (n == "outlier_blocks") return static_cast<double>(r.outlier_blocks);
  if (n == "outlier_flushed") return static_cast<double>(r.outlier_flushed);
  if (n == "nonfinite") return static_cast<double>(r.nonfinite_inputs + r.nonfinite_outputs);
  if (n == "flushed_frac") return r.flushed_frac;
  if (n == "outlier_flushed_frac") return r.outlier_flushed_frac;
  if (n == "bulk_rel_rms") return r.bulk_rel_rms;
  return std::nullopt;
}

std::optional<double> total_metric(const scan_report& r, const std::string& n) {
  const auto& g = r.totals.front();
  if (n == "total.sqnr_db") return g.sqnr_db;
  if (n == "total.rel_rms") return g.rel_rms;
  if (n == "total.flushed") return static_cast<double>(g.flushed);
  if (n == "total.clipped") return static_cast<double>(g.clipped);
  if (n == "total.outlier_blocks") return static_cast<double>(g.outlier_blocks);
  if (n == "bits_per_element") return g.elements > 0 ? g.bytes * 8.0 / static_cast<double>(g.elements) : 0.0;
  if (n == "tensors") return static_cast<double>(g.tensors);
  return std::nullopt;
}

std::pair<std::string, std::string> scan_unit_format(const std::string& n) {
  if (n.find("sqnr_db") != std::string::npos) return {"dB", "fixed"};
  if (n == "bits_per_element") return {"bits", "fixed"};
  if (n.ends_with("_frac")) return {"", "pct"};
  if (n.find("rel_rms") != std::string::npos || n == "max_abs") return {"", "sci"};
  return {"", "int"};
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.2f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

// The column a rank key orders by, as the reports name it.
const char* rank_column(scan_rank k, bool act_stats) {
  if (k == scan_rank::m_output && act_stats) return "output_sqnr_db (lowest first: E[x_j^2]-weighted, --act-stats)";
  switch (k) {
    case scan_rank::m_sqnr: return "sqnr_db (lowest first)";
    case scan_rank::m_flushed: return "flushed_frac";
    case scan_rank::m_outlier: return "outlier_flushed_frac";
    case scan_rank::m_bulk: return "bulk_rel_rms";
    case scan_rank::m_output: return "output_rel_rms (= rel_rms for isotropic activations)";
  }
  return "?";
}

// What the terminal shows: the worst tensors, the worst block element by element, the groups by
// layer type and depth, and bits and bytes per format.
void add_view(const scan_report& r, bool allow_nonfinite, result::check_result& out) {
  using result::fixed3;
  using result::sci;
  result::view_builder v(out);
  const auto& schemes = r.options.schemes;
  v.line(fmt::format("checkpoint {}: {} tensors scanned ({}), {} skipped", r.options.checkpoint, r.tensors.size(),
                     human_bytes(r.source_bytes), r.skipped.size()));
  // The flush-aware columns (flushed %, outlier-flushed %, bulk error) next to SQNR: the ranking
  // key is named in the title, and its column is marked with '*'.
  const scan_rank k = r.options.rank_by;
  const bool act = !r.options.act_stats.empty();
  if (act) {
    std::string missing;
    for (std::size_t i = 0; i < r.without_act_stats.size() && i < 5; ++i)
      missing += (i ? ", " : ": ") + r.without_act_stats[i];
    if (r.without_act_stats.size() > 5) missing += ", ...";
    v.line(fmt::format("act stats {}: {} of {} tensors weighted by E[x_j^2]; {} without statistics{}{}{}",
                       r.options.act_stats, r.tensors.size() - r.without_act_stats.size(), r.tensors.size(),
                       r.without_act_stats.size(),
                       r.without_act_stats.empty() || k != scan_rank::m_output ? "" : " (ranked after those with)",
                       missing,
                       r.act_stats_unused ? fmt::format("; {} of the file's tensors match no scanned tensor",
                                                        r.act_stats_unused)
                                          : ""));
  } else if (k == scan_rank::m_output) {
    v.line("rank by output without --act-stats: activations taken as isotropic, so output_rel_rms = rel_rms and the "
           "order is sqnr's");
  }
  const auto head = [&](const char* col, scan_rank key) { return std::string(col) + (k == key ? "*" : ""); };
  std::vector<std::string> cols = {"rank", "tensor", "shape", head("sqnr_db", scan_rank::m_sqnr),
                                   act ? std::string("rel_rms") : head("rel_rms", scan_rank::m_output),
                                   head("bulk_rel_rms", scan_rank::m_bulk), head("flushed_%", scan_rank::m_flushed),
                                   head("outlier_fl_%", scan_rank::m_outlier), "max_abs", "flushed", "clipped",
                                   "outlier_blk"};
  if (act) {  // the output error's columns only where there are statistics
    cols.push_back("out_err");
    cols.push_back(head("out_sqnr_db", scan_rank::m_output));
  }
  cols.push_back("vs");
  auto& t = v.add_table(std::move(cols),
                        fmt::format("worst tensors under {} by {}, of {} (bulk: |x| below the p{} of |x|)", schemes[0],
                                    rank_column(k, act), r.tensors.size(), k_bulk_percentile_tenths * 10));
  const auto pct = [](double f) { return fmt::format("{:.3f}", 100.0 * f); };
  for (std::size_t i = 0; i < r.tensors.size() && i < r.options.top; ++i) {
    const auto& x = r.tensors[i];
    const auto& p = x.results[0];
    std::string vs;
    for (std::size_t s = 1; s < x.results.size(); ++s)
      vs += fmt::format("{}{} {:.2f} dB", s > 1 ? ", " : "", x.results[s].scheme, x.results[s].sqnr_db);
    std::vector<std::string> row = {std::to_string(i + 1), x.name, fmt::format("{}x{}", x.rows, x.cols),
                                    fixed3(p.sqnr_db), sci(p.rel_rms), sci(p.bulk_rel_rms), pct(p.flushed_frac),
                                    pct(p.outlier_flushed_frac), sci(p.max_abs), std::to_string(p.flushed),
                                    std::to_string(p.clipped), std::to_string(p.outlier_blocks)};
    if (act) {
      row.push_back(p.output_weighted ? sci(p.output_sum_sq_err) : "-");
      row.push_back(p.output_weighted ? fixed3(p.output_sqnr_db) : "-");
    }
    row.push_back(vs.empty() ? "-" : vs);
    t.rows.push_back(std::move(row));
  }
  if (!r.tensors.empty() && !r.tensors[0].results[0].worst.flat.empty()) {
    const auto& x = r.tensors[0];
    const auto& w = x.results[0].worst;
    const auto& b = w.stats;
    auto& e = v.add_table({"element", "input", "dequant", "note"},
                          fmt::format("worst block of {} ({}): rows {}..{}, cols {}..{}, amax {} at ({},{}), scale {}, "
                                      "{} flushed, {} clipped",
                                      x.name, w.outlier ? "outlier block" : "largest error", b.row0,
                                      b.row0 + b.rows - 1, b.col0, b.col0 + b.cols - 1, sci(b.amax), b.argmax / x.cols,
                                      b.argmax % x.cols, fmt::format("{:.9g}", b.scale), b.flushed, b.clipped));
    for (std::size_t i = 0; i < w.flat.size() && i < 16; ++i) {
      std::string note = w.flat[i] == b.argmax ? "sets the scale" : "";
      if (w.input[i] != 0 && w.dequant[i] == 0) note = "FLUSHED";
      e.rows.push_back({fmt::format("({},{})", w.flat[i] / x.cols, w.flat[i] % x.cols),
                        fmt::format("{:.6g}", w.input[i]), fmt::format("{:.6g}", w.dequant[i]), note});
    }
  }
  auto& g = v.add_table({"type", "tensors", "params", "sqnr_db", "flushed", "clipped", "worst tensor"},
                        fmt::format("by layer type ({})", schemes[0]));
  for (const auto& x : r.by_type[0])
    g.rows.push_back({x.key, std::to_string(x.tensors), std::to_string(x.elements), fixed3(x.sqnr_db),
                      std::to_string(x.flushed), std::to_string(x.clipped), x.worst_tensor});
  if (r.by_depth[0].size() > 1) {
    auto& d = v.add_table({"layer", "tensors", "params", "sqnr_db", "flushed", "outlier_blk"},
                          fmt::format("by depth ({})", schemes[0]));
    for (const auto& x : r.by_depth[0])
      d.rows.push_back({x.key, std::to_string(x.tensors), std::to_string(x.elements), fixed3(x.sqnr_db),
                        std::to_string(x.flushed), std::to_string(x.outlier_blocks)});
  }
  auto& f = v.add_table({"format", "sqnr_db", "bits/param", "bytes", "flushed", "clipped"}, "per format");
  for (const auto& x : r.totals)
    f.rows.push_back({x.key, fixed3(x.sqnr_db),
                      fmt::format("{:.4f}", x.elements ? x.bytes * 8.0 / static_cast<double>(x.elements) : 0.0),
                      human_bytes(x.bytes), std::to_string(x.flushed), std::to_string(x.clipped)});
  v.line(fmt::format("read      {:.0f} MB/s", r.bytes_read / 1e6 / std::max(r.seconds, 1e-9)));
  // NaN/Inf in a checkpoint is a finding: it is excluded from the error sums, so without this
  // line a poisoned tensor would read as a good SQNR.
  std::int64_t tensors = 0, elements = 0;
  for (const auto& x : r.tensors)
    if (!x.results.empty() && x.results[0].nonfinite_inputs > 0) {
      ++tensors;
      elements += x.results[0].nonfinite_inputs;
    }
  if (tensors > 0)
    v.line(fmt::format("NON-FINITE: {} tensor(s) hold {} NaN/Inf input elements{}", tensors, elements,
                       allow_nonfinite ? " (allowed by --allow-nonfinite)" : "; exit 1 (--allow-nonfinite accepts them)"));
}

}  // namespace

const std::vector<std::string>& scan_tensor_metric_names() { return k_tensor_metrics_list; }
const std::vector<std::string>& scan_total_metric_names() { return k_total_metrics_list; }

bool scan_metric_known(const std::string& m) {
  return std::find(k_tensor_metrics_list.begin(), k_tensor_metrics_list.end(), m) != k_tensor_metrics_list.end() ||
         std::find(k_total_metrics_list.begin(), k_total_metrics_list.end(), m) != k_total_metrics_list.end();
}

void fill_result(const scan_report& r, const scan_options& o, const std::vector<bound>& bounds,
                 bool allow_nonfinite, result::check_result& out) {
  out.backend = "ref";
  out.case_id = fmt::format("scan({},{})", o.checkpoint, o.schemes.front());
  if (r.tensors.empty()) {  // only a shard can be empty (scan --shard i/N of fewer tensors than N)
    out.seconds = r.seconds;
    out.message = fmt::format("shard {}/{}: none of the checkpoint's tensors falls in this shard", o.shard_index,
                              o.shard_count);
    out.details = to_json(r);
    out.details["shard"]["allow_nonfinite"] = allow_nonfinite;
    return;
  }
  // Worst tensor for each per-tensor metric (as a gate would see it), then the totals.
  for (const auto& n : k_tensor_metrics_list) {
    const bool higher_is_better = n == "sqnr_db";
    double worst = *tensor_metric(r.tensors.front(), n);
    for (const auto& t : r.tensors) {
      const double v = *tensor_metric(t, n);
      worst = higher_is_better ? std::min(worst, v) : std::max(worst, v);
    }
    const auto [unit, format] = scan_unit_format(n);
    out.metrics.push_back({n, worst, unit, format});
  }
  for (const auto& n : k_total_metrics_list) {
    const auto [unit, format] = scan_unit_format(n);
    out.metrics.push_back({n, *total_metric(r, n), unit, format});
  }

  const auto metric = [](const scan_tensor& t, const std::string& m) { return tensor_metric(t, m); };
  const auto name_of = [](const scan_tensor& t) { return t.name; };
  for (const auto& b : bounds)
    out.gates.push_back(tensor_metric(r.tensors.front(), b.metric)
                            ? result::worst_point_gate(b, r.tensors, metric, name_of, out.case_id)
                            : result::evaluate_gate(b, total_metric(r, b.metric), out.case_id));
  // NaN/Inf inputs are a finding unless the check allows them (excluded from the error sums,
  // no other gate would see them).
  if (!allow_nonfinite) {
    std::int64_t bad = 0;
    for (const auto& t : r.tensors) bad += t.results.front().nonfinite_inputs;
    if (bad > 0)  // only when it fails: clean checkpoints keep their reports as they were
      out.gates.push_back(result::evaluate_gate(bound{"nonfinite_inputs", bound_op::m_le, 0.0,
                                            "NaN/Inf in a checkpoint is a finding (allow_nonfinite = true accepts it)"},
                                      static_cast<double>(bad), out.case_id));
  }
  out.seconds = r.seconds;
  const auto& w = r.tensors.front();
  out.message = fmt::format("{} tensors under {}: worst by {} {} ({:.2f} dB, {} flushed, {} outlier blocks)",
                            r.tensors.size(), o.schemes.front(), name(o.rank_by), w.name, w.results.front().sqnr_db,
                            w.results.front().flushed, w.results.front().outlier_blocks);

  add_view(r, allow_nonfinite, out);
  out.tables.push_back(data_table(r));
  out.details = to_json(r);
  // The merge's exit status needs it (a NaN/Inf finding is allowed or not); a whole scan's
  // document has no shard key.
  if (o.shard_count > 1) out.details["shard"]["allow_nonfinite"] = allow_nonfinite;
}

}  // namespace numprobe::probes
