// scan's result model: what `numprobe scan` and a scenario's scan check report.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/core/result_gates.hpp"
#include "probes/scan_probe.hpp"

namespace numprobe::probes {
namespace {

// Per-tensor metrics of the primary scheme; `total.*` over all scanned tensors.
const std::vector<std::string> k_tensor_metrics_list = {"sqnr_db", "rel_rms", "max_abs", "flushed",
                                                   "clipped", "scale_underflow", "outlier_blocks",
                                                   "outlier_flushed", "nonfinite"};
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

std::pair<std::string, std::string> unit_format(const std::string& n) {
  if (n.find("sqnr_db") != std::string::npos) return {"dB", "fixed"};
  if (n == "bits_per_element") return {"bits", "fixed"};
  if (n.find("rel_rms") != std::string::npos || n == "max_abs") return {"", "sci"};
  return {"", "int"};
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
  // Worst tensor for each per-tensor metric (as a gate would see it), then the totals.
  for (const auto& n : k_tensor_metrics_list) {
    const bool higher_is_better = n == "sqnr_db";
    double worst = *tensor_metric(r.tensors.front(), n);
    for (const auto& t : r.tensors) {
      const double v = *tensor_metric(t, n);
      worst = higher_is_better ? std::min(worst, v) : std::max(worst, v);
    }
    const auto [unit, format] = unit_format(n);
    out.metrics.push_back({n, worst, unit, format});
  }
  for (const auto& n : k_total_metrics_list) {
    const auto [unit, format] = unit_format(n);
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
  const auto& w = r.tensors.front();
  out.message = fmt::format("{} tensors under {}: worst {} ({:.2f} dB, {} flushed, {} outlier blocks)",
                            r.tensors.size(), o.schemes.front(), w.name, w.results.front().sqnr_db,
                            w.results.front().flushed, w.results.front().outlier_blocks);

  std::vector<std::string> head{"tensor", "type", "layer"};
  for (const auto& sc : o.schemes) head.push_back(sc + " dB");
  head.insert(head.end(), {"flushed", "clipped", "outlier blocks"});
  result::table ranked{"tensors ranked worst first (" + o.schemes.front() + ")", head, {}};
  for (std::size_t i = 0; i < r.tensors.size() && i < 32; ++i) {
    const auto& t = r.tensors[i];
    std::vector<std::string> row{t.name, t.layer_type, t.layer >= 0 ? std::to_string(t.layer) : "-"};
    for (const auto& res : t.results) row.push_back(result::format_value(res.sqnr_db, "fixed"));
    row.push_back(std::to_string(t.results.front().flushed));
    row.push_back(std::to_string(t.results.front().clipped));
    row.push_back(std::to_string(t.results.front().outlier_blocks));
    ranked.rows.push_back(std::move(row));
  }
  out.tables.push_back(std::move(ranked));
  out.tables.push_back(data_table(r));
  out.details = to_json(r);
}

}  // namespace numprobe::probes
