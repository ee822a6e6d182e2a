// Check runner for `probe = "attention"`: one case on a backend against the reference.
#include <algorithm>
#include <fmt/format.h>

#include "probes/attention_probe.hpp"
#include "src/scenario/attention_params.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

std::string names_text(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Units and format hints of the point metrics (for writers).
std::pair<std::string, std::string> unit_format(const std::string& name) {
  if (name == "nan_count" || name == "inf_count" || name == "rows_evaluated") return {"elements", "int"};
  if (name == "ratio_to_naive") return {"", "fixed"};
  if (name == "max_ulp") return {"ulp", "sci"};
  if (name == "lse_max_abs") return {"nats", "sci"};
  return {"", "sci"};
}

void run(const check_spec& s, const run_context& ctx, result::check_result& out) {
  const auto seq = positive(s.get_string("seq", "1024"), s.place("seq"));
  const attention_case c = make_attention_case(s, seq);
  auto prov = make_check_provider(s, ctx);
  probes::attention_probe_options po;
  po.sampling = make_check_sampling(s, c.t() <= 1024 ? 0 : 256);
  po.end_to_end = !s.get_bool("no_e2e", false);
  const auto p = probes::run_attention_point(*prov, c, po);

  out.backend = prov->name();
  out.case_id = p.case_id;
  for (const auto& n : probes::point_metric_names())
    if (const auto v = p.metric(n)) {
      const auto [unit, format] = unit_format(n);
      out.metrics.push_back({n, *v, unit, format});
    }
  out.metrics.push_back({"rows_evaluated", static_cast<double>(p.rows_evaluated), "rows", "int"});
  // A NaN anywhere in a candidate is a failure, never a pass (DESIGN.md, "Masked rows").
  out.gates.push_back(evaluate_gate(
      bound{"nonfinite", bound_op::m_le, 0.0, "a NaN or Inf in the candidate is always a failure"},
      static_cast<double>(p.kernel.nonfinite_total()), p.case_id));
  for (const auto& b : s.bounds) out.gates.push_back(evaluate_gate(b, p.metric(b.metric), p.case_id));

  std::vector<double> per_row;
  for (const auto& r : p.kernel.per_row) per_row.push_back(r.rel_rms);
  out.histograms.push_back(log_histogram(per_row, 24, "per (row, head) relative RMS error vs the reference",
                                         "rel_rms"));
  result::table worst{"worst rows (vs the reference on the same rounded inputs)",
                      {"row", "head", "q_tile", "k_tile", "keys", "rel_rms", "max_abs", "lse_abs"}, {}};
  for (const auto& r : p.worst)
    worst.rows.push_back({std::to_string(r.row), std::to_string(r.head), std::to_string(r.query_tile),
                          std::to_string(r.key_tile), std::to_string(r.keys),
                          result::format_value(r.rel_rms, "sci"), result::format_value(r.max_abs, "sci"),
                          result::format_value(r.lse_abs, "sci")});
  if (!worst.rows.empty()) out.tables.push_back(std::move(worst));
  out.details = probes::to_json(p);
  out.details["backend_metadata"] = prov->metadata();
}

}  // namespace

check_runner attention_runner() {
  check_runner r;
  r.probe = "attention";
  r.description = "one attention case on a backend vs the reference";
  r.params = attention_case_params();
  r.known_metric = [](const std::string& m) {
    const auto& n = probes::point_metric_names();
    return std::find(n.begin(), n.end(), m) != n.end();
  };
  r.metric_names = names_text(probes::point_metric_names());
  r.run = run;
  return r;
}

}  // namespace numprobe::scenario
