// Check runner for `probe = "drift"`: error against sequence length across tile boundaries.
// A bound on a point metric holds when it holds at every length; the gate shows the worst point.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "probes/attention/drift_probe.hpp"
#include "src/scenario/attention_params.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

void run_drift_check(const check_spec& s, const run_context& ctx, result::check_result& out) {
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

  probes::fill_result(r, o, out);
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
  r.run = run_drift_check;
  return r;
}

}  // namespace numprobe::scenario
