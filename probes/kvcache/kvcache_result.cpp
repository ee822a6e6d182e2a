// kvcache's result model: what `numprobe kvcache` and a scenario's kvcache check report.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "numprobe/core/result_gates.hpp"
#include "probes/kvcache/kvcache_probe.hpp"

namespace numprobe::probes {
namespace {

std::string config_name(const kvcache_point& p) {
  return fmt::format("{} {}", formats::name(p.format), emu::to_string(p.layout));
}

// The multiplier nearest 1 (in log distance): the curves show the scale a serving stack uses.
double nearest_one(const std::vector<double>& m) {
  double best = m.empty() ? 1.0 : m.front();
  for (double x : m)
    if (std::fabs(std::log(x)) < std::fabs(std::log(best))) best = x;
  return best;
}

}  // namespace

std::optional<double> kvcache_metric(const kvcache_result& r, const std::string& name) {
  if (name == "failures") return static_cast<double>(r.summary.failures);
  if (name == "clip_driven") return static_cast<double>(r.summary.clip_driven);
  if (name == "round_driven") return static_cast<double>(r.summary.round_driven);
  if (name == "worst.out_rel_rms") {
    double w = 0;
    for (const auto& p : r.points) w = std::max(w, p.out_rel_rms);
    return w;
  }
  return std::nullopt;
}

const std::vector<std::string>& kvcache_metric_names() {
  static const std::vector<std::string> names = {"failures", "clip_driven", "round_driven", "worst.out_rel_rms"};
  return names;
}

namespace {

// What the terminal shows: the context, one row per configuration (clipping against rounding
// error of K, V and the output), the summary.
void add_view(const kvcache_result& r, bool all_multipliers, result::check_result& out) {
  using result::sci;
  result::view_builder v(out);
  v.line(fmt::format("context   {} tokens, {} outlier tokens (x{:g}, rate {:g} past position {}), static scales "
                     "calibrated on the first {} tokens",
                     r.context, r.outlier_positions.size(), r.options.outlier_scale, r.options.outlier_rate,
                     r.options.outlier_after, r.calib_tokens));
  auto& t = v.add_table({"format", "scale", "mult", "seq", "outl", "K clip%", "K clip", "K round", "V clip",
                         "V round", "O clip", "O round", "O total", "bound", "result"});
  const auto& ms = r.options.multipliers;
  // Unless all are asked for: the multiplier nearest 1 at every length, and the whole sweep at
  // the longest length.
  const double nearest = nearest_one(ms);
  for (const auto& p : r.points) {
    if (!all_multipliers && ms.size() > 1 && p.multiplier != nearest && p.seq != r.context) continue;
    t.rows.push_back(
        {std::string(formats::name(p.format)), std::string(emu::to_string(p.layout)), fmt::format("{:g}", p.multiplier),
         std::to_string(p.seq), std::to_string(p.outlier_tokens),
         fmt::format("{:.3g}", p.k.elements ? 100.0 * static_cast<double>(p.k.clipped) / static_cast<double>(p.k.elements) : 0.0),
         sci(p.k.clip_rel_rms), sci(p.k.round_rel_rms), sci(p.v.clip_rel_rms), sci(p.v.round_rel_rms),
         sci(p.out_clip_rel_rms), sci(p.out_round_rel_rms), sci(p.out_rel_rms), fmt::format("{:.3g}", p.bound),
         p.fails ? "FAIL (" + p.dominant + ")" : "pass"});
  }
  v.line(fmt::format("summary   {}", r.summary.text));
}

}  // namespace

void fill_result(const kvcache_result& r, const std::vector<bound>& bounds, result::check_result& out,
                 bool all_multipliers) {
  out.backend = "emu";
  out.case_id = r.options.base.id();
  out.seconds = r.seconds;
  out.message = r.summary.text;
  for (const auto& n : kvcache_metric_names())
    out.metrics.push_back({n, *kvcache_metric(r, n), n == "worst.out_rel_rms" ? "" : "configurations",
                           n == "worst.out_rel_rms" ? "sci" : "int"});
  if (r.options.bound)
    out.gates.push_back(result::evaluate_gate(
        bound{"failures", bound_op::m_le, 0.0,
              fmt::format("output rel_rms <= {} at every format, layout, multiplier and length", *r.options.bound)},
        static_cast<double>(r.summary.failures), out.case_id));
  for (const auto& b : bounds) out.gates.push_back(result::evaluate_gate(b, kvcache_metric(r, b.metric), out.case_id));

  // Output error against the context length, one line per format and layout.
  result::curve curve{fmt::format("attention output error vs context length (scale multiplier {})",
                                  nearest_one(r.options.multipliers)),
                      "context length S (tokens)", "out rel_rms", true, true, {}, {}, {}};
  std::map<std::string, result::series> lines;
  const double m1 = nearest_one(r.options.multipliers);
  for (const auto& p : r.points) {
    if (p.multiplier != m1) continue;
    auto& s = lines[config_name(p)];
    s.name = config_name(p);
    s.x.push_back(static_cast<double>(p.seq));
    s.y.push_back(p.out_rel_rms);
  }
  for (auto& [name, s] : lines) curve.lines.push_back(std::move(s));
  if (!curve.lines.empty()) out.curves.push_back(std::move(curve));

  result::table data{"points (full precision)",
                     {"format", "layout", "multiplier", "seq", "outlier_tokens", "k_rel_rms", "k_clipped", "v_rel_rms",
                      "v_clipped", "out_clip_rel_rms", "out_round_rel_rms", "out_rel_rms", "bound", "fails"},
                     {}, true};
  auto g = [](double v) { return fmt::format("{:.17g}", v); };
  for (const auto& p : r.points) {
    const std::string fmt_name(formats::name(p.format)), layout(emu::to_string(p.layout));
    data.rows.push_back({fmt_name, layout, g(p.multiplier), std::to_string(p.seq), std::to_string(p.outlier_tokens),
                         g(p.k.rel_rms), std::to_string(p.k.clipped), g(p.v.rel_rms), std::to_string(p.v.clipped),
                         g(p.out_clip_rel_rms), g(p.out_round_rel_rms), g(p.out_rel_rms), g(p.bound),
                         p.fails ? "1" : "0"});
  }
  add_view(r, all_multipliers, out);
  out.tables.push_back(std::move(data));
  out.details = to_json(r);
}

}  // namespace numprobe::probes
