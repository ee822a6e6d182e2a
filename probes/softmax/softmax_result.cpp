// softmax's result model: what `numprobe softmax` and a scenario's softmax check report.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/core/result_gates.hpp"
#include "probes/softmax/softmax_probe.hpp"

namespace numprobe::probes {
namespace {

std::pair<std::string, std::string> softmax_unit_format(const std::string& n) {
  if (n == "nan_count" || n == "inf_count") return {"elements", "int"};
  if (n == "ratio_to_naive" || n == "top1" || n == "topk") return {"", "fixed"};
  if (n == "lse_max_abs" || n == "logp_max_abs" || n == "ce_max_abs" || n == "kl_mean" ||
      n == "kl_max" || n == "e2e.kl_mean")
    return {"nats", "sci"};
  return {"", "sci"};
}

void add_point_metrics(const softmax_point& p, result::check_result& out) {
  for (const auto& n : softmax_metric_names())
    if (const auto v = p.metric(n)) {
      const auto [unit, format] = softmax_unit_format(n);
      out.metrics.push_back({n, *v, unit, format});
    }
}

const bound k_nonfinite{"nonfinite", bound_op::m_le, 0.0,
                        "a NaN or Inf in the candidate is always a failure"};

// What the terminal shows for one case: the metric table (kernel, naive fp32, end-to-end) and
// the ratio.
void add_point_view(const softmax_point& p, result::check_result& out) {
  using result::fixed3;
  using result::sci;
  result::view_builder v(out);
  v.line(fmt::format("case      {}", p.case_id));
  v.line(fmt::format("backend   {}", out.backend));
  v.line(fmt::format("rows      {} x {} entries ({} chunks)", p.rows, p.vocab, p.chunks));
  auto& t = v.add_table({"metric", "kernel", "naive", "end-to-end"});
  auto row = [&](const char* name, auto get) {
    t.rows.push_back({name, sci(get(p.kernel)), sci(get(p.naive)), p.end_to_end ? sci(get(*p.end_to_end)) : "-"});
  };
  row("p_rel_rms", [](const auto& e) { return e.p_rel_rms; });
  row("p_max_rel", [](const auto& e) { return e.p_max_rel; });
  row("logp_max_abs", [](const auto& e) { return e.logp_max_abs; });
  row("lse_max_abs", [](const auto& e) { return e.lse_max_abs; });
  row("ce_max_abs", [](const auto& e) { return e.ce_max_abs; });
  row("kl_mean", [](const auto& e) { return e.kl_mean; });
  row("kl_max", [](const auto& e) { return e.kl_max; });
  row("top1", [](const auto& e) { return e.top1; });
  row("topk_overlap", [](const auto& e) { return e.topk_overlap; });
  t.rows.push_back({"nan/inf", fmt::format("{}/{}", p.kernel.nan_count, p.kernel.inf_count),
                    fmt::format("{}/{}", p.naive.nan_count, p.naive.inf_count),
                    p.end_to_end ? fmt::format("{}/{}", p.end_to_end->nan_count, p.end_to_end->inf_count) : "-"});
  v.line(fmt::format("ratio_to_naive  {}   (kernel p_rel_rms / naive fp32 softmax p_rel_rms, floor 6.5e-7; healthy <= 2)",
                     fixed3(p.ratio_to_naive)));
  if (p.nonfinite())
    v.line(fmt::format("the candidate holds NaN or Inf ({} NaN, {} Inf)", p.kernel.nan_count, p.kernel.inf_count));
}

// What the terminal shows for a sweep over the row length: the points, the growth fit, and
// where each bound broke.
void add_sweep_view(const softmax_sweep& s, result::check_result& out) {
  using result::fixed3;
  using result::sci;
  result::view_builder v(out);
  v.line(fmt::format("backend   {}   chunk {}", s.kernel, s.chunk > 0 ? std::to_string(s.chunk) : "-"));
  auto& t = v.add_table({"vocab", "chunks", "mod", "p_rel_rms", "lse_max_abs", "kl_mean", "ratio", "nan", "case"});
  for (const auto& p : s.points)
    t.rows.push_back({std::to_string(p.vocab), std::to_string(p.chunks),
                      s.chunk > 0 ? std::to_string(p.vocab % s.chunk) : "-", sci(p.kernel.p_rel_rms),
                      sci(p.kernel.lse_max_abs), sci(p.kernel.kl_mean), fixed3(p.ratio_to_naive),
                      std::to_string(p.kernel.nan_count + p.kernel.inf_count), p.case_id});
  v.line(fmt::format("growth    slope {} +- {} (log p_rel_rms vs log chunks, {} points)  verdict: {}",
                     fixed3(s.growth.slope), fixed3(s.growth.slope_stderr), s.growth.points, s.growth.verdict));
  if (s.nan_points) v.line(fmt::format("NaN/Inf   {} points hold NaN or Inf in the output", s.nan_points));
  for (const auto& b : s.breaches)
    v.line(fmt::format("breach    {}  at vocab {}: measured {}", b.bound, b.vocab, sci(b.measured)));
}

}  // namespace

void fill_result(const softmax_point& p, const std::vector<bound>& bounds, result::check_result& out) {
  out.case_id = p.case_id;
  add_point_metrics(p, out);
  out.gates.push_back(result::evaluate_gate(k_nonfinite, static_cast<double>(p.kernel.nan_count + p.kernel.inf_count),
                                            p.case_id));
  for (const auto& b : bounds) out.gates.push_back(result::evaluate_gate(b, p.metric(b.metric), p.case_id));
  add_point_view(p, out);
  out.details = to_json(p);
}

void fill_result(const softmax_sweep& r, const softmax_sweep_options& o, result::check_result& out) {
  out.case_id = o.base.id();
  out.seconds = r.seconds;
  out.metrics.push_back({"growth.slope", r.growth.slope, "", "fixed"});
  out.metrics.push_back({"points", static_cast<double>(r.points.size()), "", "int"});
  out.metrics.push_back({"nan_points", static_cast<double>(r.nan_points), "", "int"});
  double worst_rel = 0, worst_ratio = 0;
  for (const auto& p : r.points) {
    worst_rel = std::max(worst_rel, p.kernel.p_rel_rms);
    worst_ratio = std::max(worst_ratio, p.ratio_to_naive);
  }
  out.metrics.push_back({"max.rel_rms", worst_rel, "", "sci"});
  out.metrics.push_back({"max.ratio_to_naive", worst_ratio, "", "fixed"});
  out.message = fmt::format("growth {} (slope {:.3f}) over {} row lengths", r.growth.verdict, r.growth.slope,
                            r.points.size());
  out.gates.push_back(result::evaluate_gate(
      bound{"nan_points", bound_op::m_le, 0.0, k_nonfinite.basis}, static_cast<double>(r.nan_points), out.case_id));
  const auto metric = [](const softmax_point& p, const std::string& m) { return p.metric(m); };
  const auto case_of = [](const softmax_point& p) { return p.case_id; };
  for (const auto& b : o.bounds)
    out.gates.push_back(b.metric == "growth.slope" ? result::evaluate_gate(b, r.growth.slope, out.case_id)
                                                   : result::worst_point_gate(b, r.points, metric, case_of, out.case_id));

  result::curve err{"probability relative RMS error vs row length", "row length V (entries)", "rel_rms",
                    true, true, {}, {}, {}};
  result::series kern{"kernel", {}, {}}, naive{"naive same-precision", {}, {}};
  for (const auto& p : r.points) {
    kern.x.push_back(static_cast<double>(p.vocab)), kern.y.push_back(p.kernel.p_rel_rms);
    naive.x.push_back(static_cast<double>(p.vocab)), naive.y.push_back(p.naive.p_rel_rms);
  }
  err.lines = {kern, naive};
  if (r.chunk > 0)
    for (std::int64_t k = r.chunk; k <= o.vocab_hi; k += r.chunk)
      if (k >= o.vocab_lo && err.tile_boundaries.size() < 512) err.tile_boundaries.push_back(static_cast<double>(k));
  for (const auto& b : o.bounds)
    if (b.metric == "rel_rms") err.bounds.push_back({b.text(), b.value});
  out.curves = {err};
  add_sweep_view(r, out);
  out.details = to_json(r);
}

}  // namespace numprobe::probes
