// drift's result model: what `numprobe drift` and a scenario's drift check both report.
#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "numprobe/base/error.hpp"

#include "numprobe/core/result_gates.hpp"
#include "probes/attention/drift_probe.hpp"

namespace numprobe::probes {
namespace {

// One row per point at full precision, decode sweeps led by their split count and page size.
result::table data_table(const drift_result& r) {
  const bool series = !r.series.empty();
  result::table t{"points (full precision)", {}, {}, true};
  if (series) t.columns = {"splits", "page_size"};
  for (const char* c : {"case", "seq", "queries", "key_tiles", "seq_mod_tile", "rows", "rel_rms", "max_abs",
                        "max_rel", "max_ulp", "lse_max_abs", "nan_count", "inf_count", "naive_rel_rms",
                        "ratio_to_naive", "e2e_rel_rms"})
    t.columns.emplace_back(c);
  const std::int64_t tk = r.tiles.known() ? r.tiles.k : 0;
  auto g = [](double v) { return fmt::format("{:.17g}", v); };
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    std::vector<std::string> row;
    if (series) {
      const auto& s = r.series[r.point_series[i]];
      row = {std::to_string(s.splits), std::to_string(s.page_size)};
    }
    for (auto& cell : std::vector<std::string>{
             p.case_id, std::to_string(p.seq), std::to_string(p.queries),
             std::to_string(tk ? (p.seq + tk - 1) / tk : 0), std::to_string(tk ? p.seq % tk : 0),
             std::to_string(p.rows_evaluated), g(p.kernel.rel_rms), g(p.kernel.max_abs), g(p.kernel.max_rel),
             g(p.kernel.max_ulp), g(p.kernel.lse_max_abs), std::to_string(p.kernel.nan_count),
             std::to_string(p.kernel.inf_count), g(p.naive.rel_rms), g(p.ratio_to_naive),
             p.end_to_end ? g(p.end_to_end->rel_rms) : std::string()})
      row.push_back(std::move(cell));
    t.rows.push_back(std::move(row));
  }
  return t;
}


// What the terminal shows (and Markdown and HTML with it): the tile, the points, the series of
// a decode sweep, both growth fits with the verdict, and one line per breached bound.
void add_view(const drift_result& r, const drift_options& o, result::check_result& out) {
  using result::fixed3;
  using result::sci;
  result::view_builder v(out);
  // Opaque kernels: the inferred tile that chose the lengths, or the dense fallback.
  std::string tile = r.tiles.known() ? fmt::format("{}x{}", r.tiles.q, r.tiles.k) : "opaque";
  if (!r.tiles.known() && r.inferred_tile.ran)
    tile = r.inferred_tile.known() ? tile_text(r.inferred_tile)
                                   : fmt::format("unknown: dense lengths crossing 16..256 ({})",
                                                 r.inferred_tile.evidence);
  v.line(fmt::format("backend   {}   tile {}", r.provider, tile));
  const bool series = !r.series.empty();
  std::vector<std::string> cols{"seq", "tiles", "mod", "rel_rms", "max_abs", "naive", "ratio", "nan", "case"};
  if (series) cols.insert(cols.begin(), {"splits", "page"});
  auto& t = v.add_table(cols);
  const std::int64_t tk = r.tiles.known() ? r.tiles.k : 0;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    std::vector<std::string> row;
    if (series) {
      const auto& s = r.series[r.point_series[i]];
      row = {s.splits ? std::to_string(s.splits) : "-", s.page_size ? std::to_string(s.page_size) : "-"};
    }
    for (auto& cell : std::vector<std::string>{
             std::to_string(p.seq), tk ? std::to_string((p.seq + tk - 1) / tk) : "-",
             tk ? std::to_string(p.seq % tk) : "-", sci(p.kernel.rel_rms), sci(p.kernel.max_abs),
             sci(p.naive.rel_rms), fixed3(p.ratio_to_naive), std::to_string(p.kernel.nonfinite_total()), p.case_id})
      row.push_back(std::move(cell));
    t.rows.push_back(std::move(row));
  }
  if (series) {
    auto& st = v.add_table({"splits", "page", "points", "worst rel_rms", "at seq", "nan pts", "breaches", "slope",
                            "result"});
    for (const auto& s : r.series)
      st.rows.push_back({s.splits ? std::to_string(s.splits) : "default",
                         s.page_size ? std::to_string(s.page_size) : "default", std::to_string(s.points),
                         sci(s.worst_rel_rms), std::to_string(s.worst_seq), std::to_string(s.nan_points),
                         std::to_string(s.breaches), fixed3(s.growth.slope), s.pass ? "pass" : "FAIL"});
  }
  // Both fits, then the verdict; an insufficient fit (under 3 usable points) shows "n/a".
  auto slope_text = [](const metrics::loglog_fit& f) {
    return f.verdict == "insufficient" ? std::string("n/a")
                                       : fmt::format("{} +- {}", fixed3(f.slope), fixed3(f.slope_stderr));
  };
  v.line(fmt::format("growth    slope {} (log rel_rms vs log key tiles, {} points), ratio slope {} (log "
                     "ratio_to_naive, {} points)  verdict: {}",
                     slope_text(r.growth.error), r.growth.error.points, slope_text(r.growth.ratio),
                     r.growth.ratio.points, r.growth.verdict));
  if (r.growth.verdict == "insufficient")
    v.line(fmt::format("          (a growth verdict needs {} usable points; growth bounds fail)",
                       metrics::k_growth_min_points));
  if (r.nan_points) v.line(fmt::format("NaN/Inf   {} points hold NaN or Inf in the output", r.nan_points));
  for (const auto& e : r.point_errors)  // backend failures: the sweep went on without them
    v.line(fmt::format("ERROR     seq {}: {}", e.seq, e.message));
  for (const auto& e : r.unsupported_points)  // declared refusals: skipped, not errors
    v.line(fmt::format("UNSUPPORTED seq {}: {}", e.seq, e.message));
  // One line per bound: how many points break it, the first, and the worst.
  std::vector<std::string> order;
  for (const auto& b : r.breaches)
    if (std::find(order.begin(), order.end(), b.bound) == order.end()) order.push_back(b.bound);
  for (const auto& name : order) {
    std::size_t n = 0;
    const drift_breach* first = nullptr;
    const drift_breach* worst = nullptr;
    for (const auto& b : r.breaches) {
      if (b.bound != name) continue;
      ++n;
      if (!first) first = &b;
      if (!worst || !(b.measured <= worst->measured)) worst = &b;
    }
    if (first->seq == 0)
      v.line(fmt::format("breach    {}  measured {}", name, sci(first->measured)));
    else
      v.line(fmt::format("breach    {}  at {} of {} points; first at seq {} ({}), worst {} at seq {}", name, n,
                         r.points.size(), first->seq, sci(first->measured), sci(worst->measured), worst->seq));
  }
  if (!r.breaches.empty() || r.nan_points) v.line(fmt::format("breaches sit on: {}", r.tile_pattern));
  if (o.bounds.empty()) v.line("(no --bound given: gating only on NaN/Inf; e.g. --bound ratio_to_naive<=2)");
}

}  // namespace

void fill_result(const drift_result& r, const drift_options& o, result::check_result& out) {
  out.backend = r.provider;
  out.case_id = o.base.id();
  out.seconds = r.seconds;
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

  out.gates.push_back(result::evaluate_gate(
      bound{"nan_points", bound_op::m_le, 0.0, "a NaN or Inf in the candidate is always a failure"},
      static_cast<double>(r.nan_points), out.case_id));
  for (const auto& b : o.bounds) {
    // An insufficient fit (under 3 usable points) measures NaN: the gate fails, never passes.
    if (const auto m = metrics::growth_metric(r.growth, b.metric)) {
      out.gates.push_back(result::evaluate_gate(b, *m, out.case_id));
      continue;
    }
    out.gates.push_back(result::worst_point_gate(
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
  // The key-tile boundaries the sweep probed (a tested length within one key of a multiple of
  // the tile), not every multiple: above a few hundred tiles those merge into a grey band.
  if (r.tiles.known()) {
    std::set<std::int64_t> probed;
    for (const auto& p : r.points)
      for (std::int64_t s : {p.seq - 1, p.seq, p.seq + 1})
        if (s > 0 && s % r.tiles.k == 0) probed.insert(s);
    for (const auto k : probed) {
      err.tile_boundaries.push_back(static_cast<double>(k));
      ratio.tile_boundaries.push_back(static_cast<double>(k));
    }
  }
  for (const auto& b : o.bounds) {
    if (b.metric == "rel_rms") err.bounds.push_back({b.text(), b.value});
    if (b.metric == "ratio_to_naive") ratio.bounds.push_back({b.text(), b.value});
  }
  out.curves = {err, ratio};
  add_view(r, o, out);
  out.tables.push_back(data_table(r));
  out.details = to_json(r);
}

int fill_command_result(const drift_result& r, const drift_options& o, const attention_provider& provider,
                        result::check_result& out) {
  fill_result(r, o, out);
  out.details["backend"] = {{"name", provider.name()}, {"metadata", provider.metadata()}};
  out.details["base_case"] = o.base.id();
  out.details["bounds"] = nlohmann::json::array();
  for (const auto& b : o.bounds) out.details["bounds"].push_back(b.text());
  out.details["pass"] = !r.gated_breach;
  // Nothing measured because the kernel refused every point: no evidence, and not a crash.
  if (r.points.empty() && r.point_errors.empty() && !r.unsupported_points.empty())
    throw_input_error("--backend", fmt::format("the kernel declares every point of this sweep unsupported ({}): "
                                               "nothing was measured", r.unsupported_points.front().message));
  return !r.point_errors.empty() ? 3 : r.gated_breach ? 1 : 0;
}

}  // namespace numprobe::probes
