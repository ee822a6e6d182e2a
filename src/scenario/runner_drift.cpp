// Check runner for `probe = "drift"`: error against sequence length across tile boundaries.
// A bound on a point metric holds when it holds at every length; the gate shows the worst point.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "probes/drift_probe.hpp"
#include "src/scenario/attention_params.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

void run(const check_spec& s, const run_context& ctx, result::check_result& out) {
  const auto seq = s.get_string("seq", "128..8192");
  const auto dots = seq.find("..");
  const std::int64_t lo = positive(dots == std::string::npos ? seq : seq.substr(0, dots), s.place("seq"));
  const std::int64_t hi = dots == std::string::npos ? lo : positive(seq.substr(dots + 2), s.place("seq"));
  probes::drift_options o;
  o.base = make_attention_case(s, hi);
  o.seq_lo = lo;
  o.seq_hi = hi;
  o.points = s.get_string("points", "tile");
  o.probe.sampling = make_check_sampling(s, 64);
  o.probe.end_to_end = !s.get_bool("no_e2e", false);
  o.bounds = s.bounds;
  o.on_point = [&ctx](std::size_t, std::size_t, std::int64_t) {
    if (ctx.interrupted && ctx.interrupted()) throw interrupted_error{};
  };
  auto prov = make_check_provider(s, ctx);
  const auto r = probes::run_drift(*prov, o);

  out.backend = r.provider;
  out.case_id = o.base.id();
  out.metrics.push_back({"growth.slope", r.growth.slope, "", "fixed"});
  out.metrics.push_back({"growth.slope_stderr", r.growth.slope_stderr, "", "fixed"});
  out.metrics.push_back({"growth.ratio_slope", r.growth.ratio.slope, "", "fixed"});
  out.metrics.push_back({"growth.ratio_slope_stderr", r.growth.ratio.slope_stderr, "", "fixed"});
  out.metrics.push_back({"points", static_cast<double>(r.points.size()), "", "int"});
  out.metrics.push_back({"nan_points", static_cast<double>(r.nan_points), "", "int"});
  double worst_rel = 0, worst_ratio = 0;
  for (const auto& p : r.points) {
    worst_rel = std::max(worst_rel, p.kernel.rel_rms);
    worst_ratio = std::max(worst_ratio, p.ratio_to_naive);
  }
  out.metrics.push_back({"max.rel_rms", worst_rel, "", "sci"});
  out.metrics.push_back({"max.ratio_to_naive", worst_ratio, "", "fixed"});
  out.message = fmt::format("growth {} (slope {:.3f}, ratio slope {:.3f}, {} points); breaches sit on: {}",
                            r.growth.verdict, r.growth.slope, r.growth.ratio.slope, r.growth.points,
                            r.tile_pattern);

  out.gates.push_back(evaluate_gate(
      bound{"nan_points", bound_op::m_le, 0.0, "a NaN or Inf in the candidate is always a failure"},
      static_cast<double>(r.nan_points), out.case_id));
  for (const auto& b : s.bounds) {
    // An insufficient fit (under 3 usable points) measures NaN: the gate fails, never passes.
    if (const auto m = metrics::growth_metric(r.growth, b.metric)) {
      out.gates.push_back(evaluate_gate(b, *m, out.case_id));
      continue;
    }
    out.gates.push_back(worst_point_gate(
        b, r.points, [](const auto& p, const std::string& m) { return p.metric(m); },
        [](const auto& p) { return p.case_id; }, out.case_id));
  }

  // Curves: error against length on log-log axes with the key-tile boundaries and bound lines.
  result::curve err{"relative RMS error vs sequence length", "sequence length S (keys)", "rel_rms", true, true, {}, {}, {}};
  result::series kern{"kernel", {}, {}}, naive{"naive same-precision", {}, {}}, e2e{"end-to-end", {}, {}};
  result::curve ratio{"ratio to the naive baseline vs sequence length", "sequence length S (keys)",
                      "ratio_to_naive", true, false, {}, {}, {}};
  result::series rat{"kernel / naive", {}, {}};
  for (const auto& p : r.points) {
    const double x = static_cast<double>(p.seq);
    kern.x.push_back(x), kern.y.push_back(p.kernel.rel_rms);
    naive.x.push_back(x), naive.y.push_back(p.naive.rel_rms);
    if (p.end_to_end) e2e.x.push_back(x), e2e.y.push_back(p.end_to_end->rel_rms);
    rat.x.push_back(x), rat.y.push_back(p.ratio_to_naive);
  }
  err.lines = {kern, naive};
  if (!e2e.x.empty()) err.lines.push_back(e2e);
  ratio.lines = {rat};
  if (r.tiles.known())
    for (std::int64_t k = r.tiles.k; k <= hi; k += r.tiles.k)
      if (k >= lo) {
        err.tile_boundaries.push_back(static_cast<double>(k));
        ratio.tile_boundaries.push_back(static_cast<double>(k));
      }
  for (const auto& b : s.bounds) {
    if (b.metric == "rel_rms") err.bounds.push_back({b.text(), b.value});
    if (b.metric == "ratio_to_naive") ratio.bounds.push_back({b.text(), b.value});
  }
  out.curves = {err, ratio};
  result::table pts{"points", {"seq", "key tiles", "seq mod Bk", "rel_rms", "naive", "ratio", "nan", "case"}, {}};
  for (const auto& p : r.points) {
    const std::int64_t tk = r.tiles.known() ? r.tiles.k : 0;
    pts.rows.push_back({std::to_string(p.seq), tk ? std::to_string((p.seq + tk - 1) / tk) : "-",
                        tk ? std::to_string(p.seq % tk) : "-", result::format_value(p.kernel.rel_rms, "sci"),
                        result::format_value(p.naive.rel_rms, "sci"), result::format_value(p.ratio_to_naive, "fixed"),
                        std::to_string(p.kernel.nonfinite_total()), p.case_id});
  }
  out.tables.push_back(std::move(pts));
  out.details = probes::to_json(r);
  out.details["backend_metadata"] = prov->metadata();
}

}  // namespace

check_runner drift_runner() {
  check_runner r;
  r.probe = "drift";
  r.description = "error vs sequence length, tile-boundary aware, growth fit";
  r.params = attention_case_params();
  r.params.push_back({"points", param_kind::m_string, "tile | log:N | comma list of lengths"});
  r.known_metric = [](const std::string& m) {
    const auto& n = probes::point_metric_names();
    return metrics::is_growth_metric(m) || std::find(n.begin(), n.end(), m) != n.end();
  };
  r.metric_names = "growth.slope, growth.ratio_slope, and every point metric (worst point): ";
  for (const auto& n : probes::point_metric_names()) r.metric_names += n + " ";
  r.run = run;
  return r;
}

}  // namespace numprobe::scenario
