// kvcache's result model: what `numprobe kvcache` and a scenario's kvcache check report.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "numprobe/core/result_gates.hpp"
#include "probes/kvcache_probe.hpp"

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

void fill_result(const kvcache_result& r, const std::vector<bound>& bounds, result::check_result& out) {
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

  result::table t{"configurations (output error split into clipping and rounding)",
                  {"format", "scale", "mult", "seq", "out rel_rms", "clip", "round", "bound", "driver", "result"}, {}};
  result::table data{"points (full precision)",
                     {"format", "layout", "multiplier", "seq", "outlier_tokens", "k_rel_rms", "k_clipped", "v_rel_rms",
                      "v_clipped", "out_clip_rel_rms", "out_round_rel_rms", "out_rel_rms", "bound", "fails"},
                     {}, true};
  auto g = [](double v) { return fmt::format("{:.17g}", v); };
  for (const auto& p : r.points) {
    const std::string fmt_name(formats::name(p.format)), layout(emu::to_string(p.layout));
    t.rows.push_back({fmt_name, layout, fmt::format("{:g}", p.multiplier), std::to_string(p.seq),
                      result::format_value(p.out_rel_rms, "sci"), result::format_value(p.out_clip_rel_rms, "sci"),
                      result::format_value(p.out_round_rel_rms, "sci"), result::format_value(p.bound, "sci"),
                      p.dominant, p.fails ? "FAIL" : "pass"});
    data.rows.push_back({fmt_name, layout, g(p.multiplier), std::to_string(p.seq), std::to_string(p.outlier_tokens),
                         g(p.k.rel_rms), std::to_string(p.k.clipped), g(p.v.rel_rms), std::to_string(p.v.clipped),
                         g(p.out_clip_rel_rms), g(p.out_round_rel_rms), g(p.out_rel_rms), g(p.bound),
                         p.fails ? "1" : "0"});
  }
  out.tables.push_back(std::move(t));
  out.tables.push_back(std::move(data));
  out.details = to_json(r);
}

}  // namespace numprobe::probes
