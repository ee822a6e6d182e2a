// attention's result model: what `numprobe attention` and a scenario's attention check report.
#include "probes/attention/attention_result.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "numprobe/core/result_gates.hpp"

namespace numprobe::probes {
namespace {

// Units and format hints of the point metrics (for writers).
std::pair<std::string, std::string> attention_unit_format(const std::string& name) {
  if (name == "nan_count" || name == "inf_count" || name == "rows_evaluated") return {"elements", "int"};
  if (name == "ratio_to_naive") return {"", "fixed"};
  if (name == "max_ulp") return {"ulp", "sci"};
  if (name == "lse_max_abs") return {"nats", "sci"};
  return {"", "sci"};
}

// What the terminal shows: the case, the rows evaluated, NaN/Inf on one line, the metric table
// (kernel, naive same-precision, end-to-end), the ratio and the worst rows with their tiles.
void add_view(const attention_point& p, result::check_result& out) {
  using result::fixed3;
  using result::sci;
  result::view_builder v(out);
  v.line(fmt::format("case      {}", p.case_id));
  v.line(fmt::format("backend   {}", out.backend));
  v.line(fmt::format("rows      {} of {} query rows{} (x {} heads)", p.rows_evaluated, p.queries,
                     p.rows_evaluated < p.queries ? " (stratified sample)" : "",
                     p.kernel.per_row.empty() ? 0 : p.kernel.per_row.size() / std::max<std::size_t>(1, p.rows_evaluated)));
  // NaN/Inf first and on one line: it is the finding, and the table below reads inf throughout.
  if (p.nonfinite.total() > 0) {
    v.blank();
    v.line(fmt::format("NaN/Inf   {}", p.nonfinite.summary()));
  }
  auto& t = v.add_table({"metric", "kernel", "naive", "end-to-end"});
  auto row = [&](const char* name, auto get) {
    t.rows.push_back({name, sci(get(p.kernel)), sci(get(p.naive)),
                      p.end_to_end ? sci(get(*p.end_to_end)) : std::string("-")});
  };
  row("rel_rms", [](const auto& e) { return e.rel_rms; });
  row("max_abs", [](const auto& e) { return e.max_abs; });
  row("max_rel", [](const auto& e) { return e.max_rel; });
  row("max_ulp", [](const auto& e) { return e.max_ulp; });
  row("lse_max_abs", [](const auto& e) { return e.lse_max_abs; });
  t.rows.push_back({"nan/inf", fmt::format("{}/{}", p.kernel.nan_count, p.kernel.inf_count),
                    fmt::format("{}/{}", p.naive.nan_count, p.naive.inf_count),
                    p.end_to_end ? fmt::format("{}/{}", p.end_to_end->nan_count, p.end_to_end->inf_count) : "-"});
  auto lse_counts = [](const auto& e) {
    return e.lse_known ? fmt::format("{}/{}", e.lse_nan_count, e.lse_inf_count) : std::string("no LSE");
  };
  t.rows.push_back({"lse nan/inf", lse_counts(p.kernel), lse_counts(p.naive),
                    p.end_to_end ? lse_counts(*p.end_to_end) : "-"});
  v.line(fmt::format("ratio_to_naive  {}   (kernel rel_rms / naive same-precision rel_rms; healthy <= 2)",
                     fixed3(p.ratio_to_naive)));
  if (!p.worst.empty()) {
    auto& w = v.add_table({"row", "head", "q_tile", "k_tile", "keys", "rel_rms", "max_abs", "lse_abs"},
                          "worst rows (vs the reference on the same rounded inputs):");
    for (const auto& r : p.worst)
      w.rows.push_back({std::to_string(r.row), std::to_string(r.head), std::to_string(r.query_tile),
                        std::to_string(r.key_tile), std::to_string(r.keys), sci(r.rel_rms), sci(r.max_abs),
                        sci(r.lse_abs)});
  }
  if (p.nonfinite_total() > 0)
    v.line(fmt::format("the candidate output holds NaN or Inf ({} NaN, {} Inf in O; {} NaN, {} Inf in LSE)",
                       p.kernel.nan_count, p.kernel.inf_count, p.kernel.lse_nan_count, p.kernel.lse_inf_count));
}

}  // namespace

void fill_result(const attention_point& p, const std::vector<bound>& bounds, result::check_result& out) {
  out.case_id = p.case_id;
  for (const auto& n : probes::point_metric_names())
    if (const auto v = p.metric(n)) {
      const auto [unit, format] = attention_unit_format(n);
      out.metrics.push_back({n, *v, unit, format});
    }
  out.metrics.push_back({"rows_evaluated", static_cast<double>(p.rows_evaluated), "rows", "int"});
  // A NaN anywhere in a candidate is a failure, never a pass (DESIGN.md, "Masked rows").
  out.gates.push_back(result::evaluate_gate(
      bound{"nonfinite", bound_op::m_le, 0.0, "a NaN or Inf in the candidate is always a failure"},
      static_cast<double>(p.kernel.nonfinite_total()), p.case_id));
  for (const auto& b : bounds) out.gates.push_back(result::evaluate_gate(b, p.metric(b.metric), p.case_id));

  std::vector<double> per_row;
  for (const auto& r : p.kernel.per_row) per_row.push_back(r.rel_rms);
  out.histograms.push_back(result::log_histogram(per_row, 24, "per (row, head) relative RMS error vs the reference",
                                         "rel_rms"));
  add_view(p, out);
  out.details = to_json(p);
}

}  // namespace numprobe::probes
