// Check runner for `probe = "quant"`: quantize one tensor with a format and a block-scaling
// scheme. It runs the reference codec (quant has no kernel backends yet), so --backend does not
// apply to it.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/core/error.hpp"
#include "probes/quant_probe.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

const std::vector<std::string> k_metrics = {
    "sqnr_db", "rel_rms", "max_abs", "max_rel", "flushed", "flushed_frac", "clipped", "clipped_frac",
    "scale_underflow", "outlier_blocks", "outlier_flushed", "nonfinite", "bits_per_element"};

std::pair<std::string, std::string> unit_format(const std::string& n) {
  if (n == "sqnr_db") return {"dB", "fixed"};
  if (n == "flushed" || n == "clipped" || n == "outlier_flushed" || n == "nonfinite") return {"elements", "int"};
  if (n == "scale_underflow" || n == "outlier_blocks") return {"blocks", "int"};
  if (n == "flushed_frac" || n == "clipped_frac") return {"", "pct"};
  if (n == "bits_per_element") return {"bits", "fixed"};
  return {"", "sci"};
}

probes::quant_probe_options make_options(const check_spec& s) {
  probes::quant_probe_options o;
  const auto& sch = formats::find_scheme(s.get_string("scheme", "nvfp4"), s.place("scheme"));
  o.scheme_name = std::string(sch.name);
  o.config = sch.defaults;
  if (s.has("format")) o.config.element = formats::parse_format(s.get_string("format", ""), s.place("format"));
  if (s.has("scale_format"))
    o.config.scale_format = formats::parse_format(s.get_string("scale_format", ""), s.place("scale_format"));
  if (s.has("axis")) o.config.axis = static_cast<int>(s.get_int("axis", 1));
  if (s.has("group")) o.config.group = s.get_int("group", 128);
  if (s.has("rule")) o.config.rule = formats::parse_mx_rule(s.get_string("rule", ""), s.place("rule"));
  const auto rnd = s.get_string("rounding", "rne");
  if (rnd == "rne") o.config.round = formats::rounding::m_nearest_even;
  else if (rnd == "rtz") o.config.round = formats::rounding::m_toward_zero;
  else if (rnd == "stochastic") o.config.round = formats::rounding::m_stochastic;
  else throw_input_error(s.place("rounding"), fmt::format("expected rne, rtz or stochastic, got '{}'", rnd));
  const auto ov = s.get_string("overflow", "saturate");
  if (ov == "saturate") o.config.over = formats::overflow::m_saturate;
  else if (ov == "nan") o.config.over = formats::overflow::m_nan;
  else if (ov == "inf") o.config.over = formats::overflow::m_inf;
  else throw_input_error(s.place("overflow"), fmt::format("expected saturate, nan or inf, got '{}'", ov));
  o.seed = static_cast<std::uint64_t>(s.get_int("seed", 7));
  o.config.seed = o.seed;
  o.input = s.get_string("input", "");
  o.dist = probes::parse_quant_dist(s.get_string("dist", "llm"), s.place("dist"));
  if (s.has("shape")) {
    const auto sh = probes::parse_shape(s.get_string("shape", ""), s.place("shape"));
    o.rows = sh.rows;
    o.cols = sh.cols;
  } else if (o.input.empty()) {
    o.rows = 256;
    o.cols = 1024;
  }
  o.bounds = s.bounds;
  o.worst_count = static_cast<std::size_t>(std::max<std::int64_t>(0, s.get_int("worst", 5)));
  formats::validate(o.config, 1, 1);
  return o;
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

void run(const check_spec& s, const run_context&, result::check_result& out) {
  const auto o = make_options(s);
  const auto r = probes::run_quant(o);
  out.backend = "ref";
  out.case_id = r.case_id;
  for (const auto& n : k_metrics) {
    const auto [unit, format] = unit_format(n);
    out.metrics.push_back({n, probes::quant_metric(r.metrics, n), unit, format});
  }
  out.metrics.push_back({"blocks", static_cast<double>(r.metrics.blocks), "blocks", "int"});
  for (const auto& b : s.bounds) out.gates.push_back(evaluate_gate(b, probes::quant_metric(r.metrics, b.metric), r.case_id));
  // NaN/Inf inputs are a finding unless the check allows them (excluded from the error metrics).
  // The gate appears only when it fails, so clean inputs keep their reports as they were.
  if (!s.get_bool("allow_nonfinite", false) && r.metrics.nan_inputs + r.metrics.inf_inputs > 0)
    out.gates.push_back(evaluate_gate(bound{"nonfinite_inputs", bound_op::m_le, 0.0,
                                            "NaN/Inf in the input is a finding (allow_nonfinite = true accepts it)"},
                                      static_cast<double>(r.metrics.nan_inputs + r.metrics.inf_inputs), r.case_id));

  std::vector<double> rel;
  rel.reserve(r.input.size());
  for (std::size_t i = 0; i < r.input.size(); ++i)
    if (std::isfinite(r.input[i]) && r.input[i] != 0.0)
      rel.push_back(std::fabs(r.result.dequant[i] - r.input[i]) / std::fabs(r.input[i]));
  out.histograms.push_back(log_histogram(rel, 30, "per-element relative error |q - x| / |x|", "relative error"));
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
  out.details = probes::to_json(r);
}

}  // namespace

check_runner quant_runner() {
  using K = param_kind;
  check_runner r;
  r.probe = "quant";
  r.description = "quantize one tensor: error, flushes, clipping, outlier blocks (reference codec)";
  r.params = {{"format", K::m_string, "element format (default: the scheme's)"},
              {"scheme", K::m_string, "block-scaling scheme"},
              {"input", K::m_string, "PATH[:TENSOR] (.npy, .safetensors); default synthetic"},
              {"shape", K::m_string, "MxN (default 256x1024)"},
              {"dist", K::m_string, "normal | laplace | llm | outliers"},
              {"axis", K::m_int, "axis blocks run along"},
              {"group", K::m_int, "group size"},
              {"scale_format", K::m_string, "f32 | f16 | bf16 | e4m3fn | e8m0"},
              {"rule", K::m_string, "MX scale rule floor | ceil | rceil"},
              {"rounding", K::m_string, "rne | rtz | stochastic"},
              {"overflow", K::m_string, "saturate | nan | inf"},
              {"seed", K::m_int, "input seed"},
              {"allow_nonfinite", K::m_bool, "pass even when the input holds NaN/Inf"},
              {"worst", K::m_int, "worst blocks to list"}};
  r.known_metric = [](const std::string& m) { return std::find(k_metrics.begin(), k_metrics.end(), m) != k_metrics.end(); };
  for (const auto& n : k_metrics) r.metric_names += (r.metric_names.empty() ? "" : ", ") + n;
  r.run = run;
  return r;
}

}  // namespace numprobe::scenario
