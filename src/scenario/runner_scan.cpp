// Check runner for `probe = "scan"`: quantize every matrix of a checkpoint with a primary
// scheme (and optional comparison schemes) and gate on the tensor that loses the most. Point
// metrics are per tensor; a bound on one holds when it holds for every tensor, and the gate
// names the worst tensor (as drift names the worst length).
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "probes/scan/scan_probe.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

void run_scan_check(const check_spec& s, const run_context&, result::check_result& out) {
  probes::scan_options o;
  if (!s.has("checkpoint")) throw_input_error(s.place("checkpoint"), "the scan probe needs a checkpoint");
  o.checkpoint = s.get_string("checkpoint", "");
  o.schemes = {s.get_string("format", "nvfp4")};
  for (const auto& v : s.get_strings("vs")) o.schemes.push_back(v);
  o.filter = s.get_string("filter", "");
  o.all = s.get_bool("all", false);
  o.act_stats = s.get_string("act_stats", "");
  if (s.has("rank_by")) o.rank_by = probes::parse_scan_rank(s.get_string("rank_by", ""), s.place("rank_by"));
  const auto r = probes::run_scan(o);
  // run_scan refuses empty selections itself, naming the filter only when one was given.
  if (r.tensors.empty() || r.totals.empty())
    throw_input_error(s.has("filter") ? s.place("filter") : s.place("checkpoint"),
                      fmt::format("no tensor of {} was selected", o.checkpoint));

  probes::fill_result(r, o, s.bounds, s.get_bool("allow_nonfinite", false), out);
}

}  // namespace

check_runner scan_runner() {
  check_runner r;
  r.probe = "scan";
  r.description = "every matrix of a checkpoint through a format/scheme, gated on the worst tensor";
  r.params = {
      {"checkpoint", param_kind::m_string, ".safetensors file or sharded index .json"},
      {"format", param_kind::m_string, "primary format/scheme (ranking and gates), default nvfp4"},
      {"vs", param_kind::m_strings, "schemes to compare alongside (reported, not gated)"},
      {"filter", param_kind::m_string, "regex on tensor names"},
      {"all", param_kind::m_bool, "include non-matrix tensors (norms, biases)"},
      {"act_stats", param_kind::m_string, "per-input-channel E[x^2] (.safetensors) for rank_by output (scan --act-stats)"},
      {"rank_by", param_kind::m_string, "ranking key: sqnr, flushed, outlier, bulk (default), output"},
      {"allow_nonfinite", param_kind::m_bool, "pass even when input tensors hold NaN/Inf"},
  };
  r.known_metric = probes::scan_metric_known;
  r.metric_names = "per tensor (worst tensor): ";
  for (const auto& n : probes::scan_tensor_metric_names()) r.metric_names += n + " ";
  r.metric_names += "; totals: ";
  for (const auto& n : probes::scan_total_metric_names()) r.metric_names += n + " ";
  r.run = run_scan_check;
  return r;
}

}  // namespace numprobe::scenario
