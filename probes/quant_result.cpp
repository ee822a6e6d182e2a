// quant's result model: what `numprobe quant` and a scenario's quant check report.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/core/result_gates.hpp"
#include "probes/quant_probe.hpp"

namespace numprobe::probes {
namespace {

std::pair<std::string, std::string> unit_format(const std::string& n) {
  if (n == "sqnr_db") return {"dB", "fixed"};
  if (n == "flushed" || n == "clipped" || n == "outlier_flushed" || n == "nonfinite") return {"elements", "int"};
  if (n == "scale_underflow" || n == "outlier_blocks") return {"blocks", "int"};
  if (n == "flushed_frac" || n == "clipped_frac") return {"", "pct"};
  if (n == "bits_per_element") return {"bits", "fixed"};
  return {"", "sci"};
}

// Flushed elements per block, summed into at most 32 x 32 cells so the map stays readable.
result::heat_map flush_map(const formats::quant_result& q) {
  result::heat_map h;
  h.title = "flushed elements per quantization block";
  h.value_label = "flushed elements";
  h.row_label = "block row";
  h.col_label = "block column";
  const std::int64_t gr = q.grid.grid_rows, gc = q.grid.grid_cols;
  h.row_step = std::max<std::int64_t>(1, (gr + 31) / 32);
  h.col_step = std::max<std::int64_t>(1, (gc + 31) / 32);
  h.rows = (gr + h.row_step - 1) / h.row_step;
  h.cols = (gc + h.col_step - 1) / h.col_step;
  h.values.assign(static_cast<std::size_t>(h.rows * h.cols), 0.0);
  for (std::int64_t r = 0; r < gr; ++r)
    for (std::int64_t c = 0; c < gc; ++c)
      h.values[static_cast<std::size_t>((r / h.row_step) * h.cols + c / h.col_step)] +=
          q.blocks[static_cast<std::size_t>(r * gc + c)].flushed;
  if (h.row_step > 1 || h.col_step > 1)
    h.title += fmt::format(" (each cell sums {}x{} blocks)", h.row_step, h.col_step);
  return h;
}

}  // namespace

const std::vector<std::string>& quant_metric_names() {
  static const std::vector<std::string> names = {
      "sqnr_db", "rel_rms", "max_abs", "max_rel", "flushed", "flushed_frac", "clipped", "clipped_frac",
      "scale_underflow", "outlier_blocks", "outlier_flushed", "nonfinite", "bits_per_element"};
  return names;
}

void fill_result(const quant_report& r, const std::vector<bound>& bounds, bool allow_nonfinite, result::check_result& out) {
  out.backend = "ref";
  out.case_id = r.case_id;
  for (const auto& n : quant_metric_names()) {
    const auto [unit, format] = unit_format(n);
    out.metrics.push_back({n, quant_metric(r.metrics, n), unit, format});
  }
  out.metrics.push_back({"blocks", static_cast<double>(r.metrics.blocks), "blocks", "int"});
  for (const auto& b : bounds) out.gates.push_back(result::evaluate_gate(b, quant_metric(r.metrics, b.metric), r.case_id));
  // NaN/Inf inputs are a finding unless the check allows them (excluded from the error metrics).
  // The gate appears only when it fails, so clean inputs keep their reports as they were.
  if (!allow_nonfinite && r.metrics.nan_inputs + r.metrics.inf_inputs > 0)
    out.gates.push_back(result::evaluate_gate(bound{"nonfinite_inputs", bound_op::m_le, 0.0,
                                            "NaN/Inf in the input is a finding (allow_nonfinite = true accepts it)"},
                                      static_cast<double>(r.metrics.nan_inputs + r.metrics.inf_inputs), r.case_id));

  std::vector<double> rel;
  rel.reserve(r.input.size());
  for (std::size_t i = 0; i < r.input.size(); ++i)
    if (std::isfinite(r.input[i]) && r.input[i] != 0.0)
      rel.push_back(std::fabs(r.result.dequant[i] - r.input[i]) / std::fabs(r.input[i]));
  out.histograms.push_back(result::log_histogram(rel, 30, "per-element relative error |q - x| / |x|", "relative error"));
  if (r.result.grid.count() > 1) out.heat_maps.push_back(flush_map(r.result));
  result::table worst{"worst outlier blocks", {"block", "row0", "col0", "amax", "scale", "flushed", "clipped"}, {}};
  for (auto i : r.worst_blocks) {
    const auto& b = r.result.blocks[static_cast<std::size_t>(i)];
    worst.rows.push_back({std::to_string(i), std::to_string(b.row0), std::to_string(b.col0),
                          result::format_value(b.amax, "sci"), result::format_value(b.scale, "sci"),
                          std::to_string(b.flushed), std::to_string(b.clipped)});
  }
  if (!worst.rows.empty()) out.tables.push_back(std::move(worst));
  out.message = fmt::format("{} of {} blocks are outlier blocks ({} flushes inside)", r.metrics.outlier_blocks,
                            r.metrics.blocks, r.metrics.outlier_flushed);
  out.details = to_json(r);
}

}  // namespace numprobe::probes
