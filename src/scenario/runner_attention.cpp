// Check runner for `probe = "attention"`: one case on a backend against the reference.
#include <algorithm>
#include <fmt/format.h>

#include "probes/attention/attention_result.hpp"
#include "src/scenario/attention_params.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

std::string names_text(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
  return s;
}

void run_attention_check(const check_spec& s, const run_context& ctx, result::check_result& out) {
  const auto seq = positive(s.get_string("seq", "1024"), s.place("seq"));
  const attention_case c = make_attention_case(s, seq);
  auto prov = make_check_provider(s, ctx);
  probes::attention_probe_options po;
  po.sampling = make_check_sampling(s, c.t() <= 1024 ? 0 : 256);
  po.end_to_end = !s.get_bool("no_e2e", false);
  const auto p = probes::run_attention_point(*prov, c, po);

  out.backend = prov->name();
  probes::fill_result(p, s.bounds, out);
  out.details["backend_metadata"] = prov->metadata();
}

}  // namespace

check_runner attention_runner() {
  check_runner r;
  r.probe = "attention";
  r.description = "one attention case on a backend vs the reference";
  r.params = attention_case_params();
  r.known_metric = [](const std::string& m) {
    const auto& n = probes::point_metric_names();
    return std::find(n.begin(), n.end(), m) != n.end();
  };
  r.metric_names = names_text(probes::point_metric_names());
  r.run = run_attention_check;
  return r;
}

}  // namespace numprobe::scenario
