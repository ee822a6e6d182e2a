// attention's result model: what `numprobe attention` and a scenario's attention check report.
#include "numprobe/core/result_gates.hpp"
#include "probes/attention_probe.hpp"

namespace numprobe::probes {
namespace {

// Units and format hints of the point metrics (for writers).
std::pair<std::string, std::string> unit_format(const std::string& name) {
  if (name == "nan_count" || name == "inf_count" || name == "rows_evaluated") return {"elements", "int"};
  if (name == "ratio_to_naive") return {"", "fixed"};
  if (name == "max_ulp") return {"ulp", "sci"};
  if (name == "lse_max_abs") return {"nats", "sci"};
  return {"", "sci"};
}

}  // namespace

void fill_result(const attention_point& p, const std::vector<bound>& bounds, result::check_result& out) {
  out.case_id = p.case_id;
  for (const auto& n : probes::point_metric_names())
    if (const auto v = p.metric(n)) {
      const auto [unit, format] = unit_format(n);
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
  result::table worst{"worst rows (vs the reference on the same rounded inputs)",
                      {"row", "head", "q_tile", "k_tile", "keys", "rel_rms", "max_abs", "lse_abs"}, {}};
  for (const auto& r : p.worst)
    worst.rows.push_back({std::to_string(r.row), std::to_string(r.head), std::to_string(r.query_tile),
                          std::to_string(r.key_tile), std::to_string(r.keys),
                          result::format_value(r.rel_rms, "sci"), result::format_value(r.max_abs, "sci"),
                          result::format_value(r.lse_abs, "sci")});
  if (!worst.rows.empty()) out.tables.push_back(std::move(worst));
  out.details = to_json(p);
}

}  // namespace numprobe::probes
