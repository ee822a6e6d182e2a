// quant's result model: what `numprobe quant` and a scenario's quant check report.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/core/result_gates.hpp"
#include "probes/quant/quant_probe.hpp"

namespace numprobe::probes {
namespace {

std::pair<std::string, std::string> quant_unit_format(const std::string& n) {
  if (n == "sqnr_db") return {"dB", "fixed"};
  if (n == "flushed" || n == "clipped" || n == "outlier_flushed" || n == "nonfinite") return {"elements", "int"};
  if (n == "gemm_nonfinite") return {"outputs", "int"};
  if (n == "gemm_acc_ratio") return {"x", "fixed"};
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

std::string rc(std::int64_t flat, std::int64_t cols) { return fmt::format("({},{})", flat / cols, flat % cols); }

// What the terminal shows: the scheme, the metric table, the worst outlier blocks and a worked
// block element by element, then the device check.
void add_view(const quant_report& r, bool allow_nonfinite, result::check_result& out) {
  using result::fixed3;
  using result::sci;
  result::view_builder v(out);
  const auto& m = r.metrics;
  const auto& q = r.result;
  const auto& c = q.config;
  v.line(fmt::format("case      {}", r.case_id));
  std::string scheme = fmt::format("scheme    {} ({}): {} elements, {} scales, blocks {}x{}, grid {}x{}",
                                   r.options.scheme_name, formats::name(c.kind), formats::name(c.element),
                                   c.kind == formats::scheme_kind::m_none ? "no" : formats::name(c.scale_format),
                                   q.grid.block_rows, q.grid.block_cols, q.grid.grid_rows, q.grid.grid_cols);
  if (c.kind == formats::scheme_kind::m_nvfp4) scheme += fmt::format(", tensor scale {}", sci(q.tensor_scale));
  if (c.kind == formats::scheme_kind::m_mx) scheme += fmt::format(", rule {}", formats::name(c.rule));
  v.line(scheme);
  v.line(fmt::format("conventions {}", formats::conventions_text(c)));
  auto& t = v.add_table({"metric", "value", ""});
  const auto frac = [&](std::int64_t n) {
    return fmt::format("{:.4f}% of elements", m.elements ? 100.0 * double(n) / double(m.elements) : 0.0);
  };
  t.rows = {{"sqnr_db", fixed3(m.sqnr_db), "dB"},
            {"rel_rms", sci(m.rel_rms), ""},
            {"max_abs", sci(m.max_abs), ""},
            {"max_rel", sci(m.max_rel), ""},
            {"flushed", std::to_string(m.flushed), "non-zero in, zero out; " + frac(m.flushed)},
            {"clipped", std::to_string(m.clipped), "beyond the element max; " + frac(m.clipped)},
            {"scale_underflow", std::to_string(m.scale_underflow_blocks),
             fmt::format("blocks of {} whose scale flushed", m.blocks)},
            {"outlier_blocks", std::to_string(m.outlier_blocks),
             fmt::format("blocks of {}; {} neighbours flushed by the element that set the scale", m.blocks,
                         m.outlier_flushed)},
            {"bits_per_element", fmt::format("{:.4f}", m.bits_per_element), "including scales"}};
  if (m.nan_inputs || m.inf_inputs || m.nonfinite_outputs)
    v.line(fmt::format("NON-FINITE: {} NaN and {} Inf inputs (excluded from the error metrics); {} finite "
                       "inputs dequantized to NaN/Inf",
                       m.nan_inputs, m.inf_inputs, m.nonfinite_outputs));
  if (!r.worst_blocks.empty()) {
    auto& w = v.add_table({"block", "at", "amax", "set by", "scale", "flushed", "by outlier", "clipped"},
                          "worst outlier blocks");
    for (auto i : r.worst_blocks) {
      const auto& b = q.blocks[static_cast<std::size_t>(i)];
      w.rows.push_back({std::to_string(i), rc(b.row0 * q.grid.cols + b.col0, q.grid.cols), sci(b.amax),
                        rc(b.argmax, q.grid.cols), sci(b.scale), std::to_string(b.flushed),
                        std::to_string(r.outlier_flushes[static_cast<std::size_t>(i)]), std::to_string(b.clipped)});
    }
  }
  if (r.worked.index >= 0) {
    const auto& b = r.worked.stats;
    auto& w = v.add_table(
        {"element", "input", "code", "dequant", "note"},
        fmt::format("worked block {} ({}): rows {}..{}, cols {}..{}; amax {} set by {}; scale {} (stored code 0x{:X}{})",
                    r.worked.index, r.worst_blocks.empty() ? "largest error" : "worst outlier block", b.row0,
                    b.row0 + b.rows - 1, b.col0, b.col0 + b.cols - 1, sci(b.amax), rc(b.argmax, q.grid.cols),
                    fmt::format("{:.9g}", b.scale), b.scale_code,
                    c.kind == formats::scheme_kind::m_asym ? fmt::format(", zero point {}", b.zero_point) : ""));
    for (std::size_t i = 0; i < r.worked.flat.size(); ++i) {
      const double x = r.worked.input[i], d = r.worked.dequant[i];
      std::string note = r.worked.flat[i] == b.argmax ? "sets the scale" : "";
      if (std::isfinite(x) && x != 0 && d == 0) note = "FLUSHED";
      if (!std::isfinite(x)) note = "non-finite input";
      w.rows.push_back({rc(r.worked.flat[i], q.grid.cols), fmt::format("{:.6g}", x),
                        fmt::format("0x{:X}", r.worked.codes[i]), fmt::format("{:.6g}", d), note});
    }
    if (r.worked.truncated) v.line(fmt::format("(first {} elements shown)", k_worked_max));
  }
  if (r.gemm.on) {
    const auto& g = r.gemm;
    auto& t = v.add_table({"metric", "value", ""},
                          fmt::format("dequant GEMM: X [{} tokens, {}] x W^T [{}, {}] through {} ({}); scale blocks of {} "
                                      "along K ({} instructions), promoted to fp32 {}{}",
                                      g.tokens, g.k, g.k, g.n, g.model, g.instruction, g.k_block,
                                      g.instructions_per_block,
                                      g.promote > 0 ? fmt::format("every {} instructions and at each block end", g.promote)
                                                    : "at each block end",
                                      g.acc_fma ? " (one fused multiply-add)" : ""));
    t.rows = {{"gemm_acc_rel_rms", sci(g.acc_rel_rms), "the model's accumulation vs fp64 of the same quantized operands"},
              {"gemm_fp32_acc_rel_rms", sci(g.fp32_acc_rel_rms), "the same chain with an fp32 accumulator (baseline)"},
              {"gemm_acc_ratio", fmt::format("{:.2f}", g.acc_ratio()),
               "model / fp32 accumulator"},
              {"gemm_rel_rms", sci(g.rel_rms), fmt::format("vs fp64 of the unquantized X and W (fp32 accumulator: {})",
                                                           sci(g.fp32_rel_rms))},
              {"gemm_nonfinite", std::to_string(g.nonfinite), "NaN/Inf outputs"}};
  }
  const std::string device = device_check_text(r);
  for (std::size_t at = 0; at < device.size();) {
    const auto nl = device.find('\n', at);
    v.line(device.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    at = nl == std::string::npos ? device.size() : nl + 1;
  }
  if (m.nan_inputs + m.inf_inputs > 0)
    v.line(fmt::format("NON-FINITE input: exit 1{}", allow_nonfinite ? " suppressed by --allow-nonfinite"
                                                                     : " (--allow-nonfinite accepts it)"));
}

}  // namespace

const std::vector<std::string>& quant_gemm_metric_names() {
  static const std::vector<std::string> names = {"gemm_acc_rel_rms", "gemm_fp32_acc_rel_rms", "gemm_acc_ratio",
                                                 "gemm_rel_rms", "gemm_nonfinite"};
  return names;
}

const std::vector<std::string>& quant_metric_names() {
  static const std::vector<std::string> names = {
      "sqnr_db", "rel_rms", "max_abs", "max_rel", "flushed", "flushed_frac", "clipped", "clipped_frac",
      "scale_underflow", "outlier_blocks", "outlier_flushed", "nonfinite", "bits_per_element"};
  return names;
}

void fill_result(const quant_report& r, const std::vector<bound>& bounds, bool allow_nonfinite, result::check_result& out) {
  out.backend = "ref";
  out.case_id = r.case_id;
  out.seconds = r.seconds;
  for (const auto& n : quant_metric_names()) {
    const auto [unit, format] = quant_unit_format(n);
    out.metrics.push_back({n, quant_metric(r.metrics, n), unit, format});
  }
  out.metrics.push_back({"blocks", static_cast<double>(r.metrics.blocks), "blocks", "int"});
  if (r.gemm.on)
    for (const auto& n : quant_gemm_metric_names()) {
      const auto [unit, format] = quant_unit_format(n);
      out.metrics.push_back({n, quant_metric(r.metrics, n), unit, format});
    }
  for (const auto& b : bounds) out.gates.push_back(result::evaluate_gate(b, quant_metric(r.metrics, b.metric), r.case_id));
  // NaN/Inf inputs are a finding unless the check allows them (excluded from the error metrics).
  // The gate appears only when it fails, so clean inputs keep their reports as they were.
  if (!allow_nonfinite && r.metrics.nan_inputs + r.metrics.inf_inputs > 0)
    out.gates.push_back(result::evaluate_gate(bound{"nonfinite_inputs", bound_op::m_le, 0.0,
                                            "NaN/Inf in the input is a finding (allow_nonfinite = true accepts it)"},
                                      static_cast<double>(r.metrics.nan_inputs + r.metrics.inf_inputs), r.case_id));
  // A NaN or Inf out of the GEMM is a finding whatever was asked.
  if (r.gemm.on && r.gemm.nonfinite > 0)
    out.gates.push_back(result::evaluate_gate(bound{"gemm_nonfinite", bound_op::m_le, 0.0,
                                                    "NaN/Inf out of the dequant GEMM is a finding"},
                                              static_cast<double>(r.gemm.nonfinite), r.case_id));

  std::vector<double> rel;
  rel.reserve(r.input.size());
  for (std::size_t i = 0; i < r.input.size(); ++i)
    if (std::isfinite(r.input[i]) && r.input[i] != 0.0)
      rel.push_back(std::fabs(r.result.dequant[i] - r.input[i]) / std::fabs(r.input[i]));
  out.histograms.push_back(result::log_histogram(rel, 30, "per-element relative error |q - x| / |x|", "relative error"));
  if (r.result.grid.count() > 1) out.heat_maps.push_back(flush_map(r.result));
  add_view(r, allow_nonfinite, out);
  out.message = fmt::format("{} of {} blocks are outlier blocks ({} flushes inside)", r.metrics.outlier_blocks,
                            r.metrics.blocks, r.metrics.outlier_flushed);
  out.details = to_json(r);
}

}  // namespace numprobe::probes
