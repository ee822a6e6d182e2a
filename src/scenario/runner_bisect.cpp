// Check runner for `probe = "bisect"`: localize a failure by length, input family and state
// precision. The check's bounds are the bisection's gates (default ratio_to_naive<=2); the check
// passes when no length in [A, B] breaches them. The trace becomes a table in every report.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "probes/point/attention_probe.hpp"
#include "probes/bisect/bisect.hpp"
#include "src/scenario/attention_params.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

void run_bisect_check(const check_spec& s, const run_context& ctx, result::check_result& out) {
  const auto seq = s.get_string("seq", "64..16384");
  const auto dots = seq.find("..");
  if (dots == std::string::npos) throw_input_error(s.place("seq"), "bisect needs seq = \"A..B\"");
  probes::bisect_options o;
  o.seq_lo = positive(seq.substr(0, dots), s.place("seq"));
  o.seq_hi = positive(seq.substr(dots + 2), s.place("seq"));
  o.base = make_attention_case(s, o.seq_hi);
  // Resolve the backend ("best" included) through the same path as the other runners.
  const auto prov = make_check_provider(s, ctx);
  o.provider.backend = prov->name().substr(0, prov->name().find('['));
  o.provider.device = ctx.device_override >= 0 ? ctx.device_override : static_cast<int>(s.get_int("device", 0));
  if (s.has("tile")) {
    const auto t = s.get_string("tile", "");
    const auto x = t.find('x');
    if (x == std::string::npos) throw_input_error(s.place("tile"), fmt::format("'{}' is not BqxBk", t));
    o.provider.tile = tile_shape{positive(t.substr(0, x), s.place("tile")), positive(t.substr(x + 1), s.place("tile"))};
  }
  for (const auto& st : s.get_strings("state")) {
    const auto eq = st.find('=');
    if (eq == std::string::npos) throw_input_error(s.place("state"), fmt::format("'{}' is not NAME=DTYPE", st));
    o.provider.states[st.substr(0, eq)] = st.substr(eq + 1);
  }
  o.provider.faults = s.get_strings("inject");
  o.bounds = s.bounds.empty() ? std::vector<bound>{probes::default_bisect_bound()} : s.bounds;
  o.probe.sampling = make_check_sampling(s, 64);
  o.probe.end_to_end = false;
  o.on_step = [&ctx](const probes::bisect_step&) {
    if (ctx.interrupted && ctx.interrupted()) throw interrupted_error{};
  };
  const auto r = probes::run_bisect(o);

  probes::fill_result(r, o, out);
}

}  // namespace

check_runner bisect_runner() {
  check_runner r;
  r.probe = "bisect";
  r.description = "localize a failure: by length, input family, state precision";
  r.params = attention_case_params();
  r.known_metric = [](const std::string& m) {
    const auto& n = probes::point_metric_names();
    return std::find(n.begin(), n.end(), m) != n.end();
  };
  for (const auto& n : probes::point_metric_names()) r.metric_names += (r.metric_names.empty() ? "" : ", ") + n;
  r.run = run_bisect_check;
  return r;
}

}  // namespace numprobe::scenario
