// Check runner for `probe = "kl"`: the distribution shift between a base model's and a candidate
// model's logits (two [N, V] files), with the statistics of `numprobe kl` as gateable metrics.
// Paths are taken as written (relative to the working directory), like the quant probe's
// `input`.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "probes/kl/kl_probe.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

bool known(const std::string& m) {
  try {
    (void)probes::kl_metric(metrics::kl_summary{}, m);
    return true;
  } catch (const error&) {
    // KL by position and the base's precision floor (kl_report_metric): the names only here,
    // their values need the run (a positions.* bound without `positions` is refused then).
    return m.starts_with("positions.") || m.starts_with("base_precision.");
  }
}

void run_kl_check(const check_spec& s, const run_context&, result::check_result& out) {
  probes::kl_probe_options o;
  if (!s.has("base") || !s.has("cand"))
    throw_input_error(s.place(s.has("base") ? "cand" : "base"), "the kl probe needs both base and cand files");
  o.base = s.get_string("base", "");
  o.cand = s.get_string("cand", "");
  o.tokens = s.get_string("tokens", "");
  o.topk = static_cast<int>(s.get_int("topk", 10));
  if (o.topk < 1 || o.topk > 1000) throw_input_error(s.place("topk"), "must be in [1, 1000]");
  o.worst = static_cast<std::size_t>(std::max<std::int64_t>(0, s.get_int("worst", 10)));
  o.threads = static_cast<unsigned>(std::max<std::int64_t>(0, s.get_int("threads", 0)));
  o.positions = s.get_int("positions", 0);
  o.seq_len = s.get_int("seq_len", 0);
  if (s.has("positions") && o.positions < 1) throw_input_error(s.place("positions"), "must be at least 1");
  if (s.has("seq_len") && o.seq_len < 1) throw_input_error(s.place("seq_len"), "must be at least 1");
  o.bounds = s.bounds;
  const auto r = probes::run_kl(o);

  probes::fill_result(r, s.bounds, out);
}

}  // namespace

check_runner kl_runner() {
  check_runner r;
  r.probe = "kl";
  r.description = "KL divergence and top-1 agreement of candidate logits vs base logits (two files)";
  r.params = {
      {"base", param_kind::m_string, "base logits PATH[:TENSOR] (.npy or .safetensors, [N, V])"},
      {"cand", param_kind::m_string, "candidate logits PATH[:TENSOR]"},
      {"tokens", param_kind::m_string, "optional N token ids PATH[:TENSOR]: perplexity ratio"},
      {"topk", param_kind::m_int, "k of the top-k overlap"},
      {"worst", param_kind::m_int, "positions with the largest KL to list"},
      {"threads", param_kind::m_int, "worker threads (0: all cores; results do not depend on it)"},
      {"positions", param_kind::m_int, "position bins: KL mean and p99 per bin with a growth fit (kl --positions)"},
      {"seq_len", param_kind::m_int, "positions per sequence when rows hold several (kl --seq-len)"},
  };
  r.known_metric = known;
  r.metric_names = "kld.mean, kld.stderr, kld.median, kld.p90, kld.p99, kld.p999, kld.max, top1, "
                   "topk_overlap, delta_p.mean, delta_p.rms, delta_p.min, delta_p.p01..p99, delta_p.max, "
                   "ppl_ratio, ln_ppl_ratio, positions.last_over_first, positions.slope_per_1k, "
                   "positions.log2_slope, positions.r2, base_precision.floor_kld_mean, "
                   "base_precision.mean_over_floor";
  r.run = run_kl_check;
  return r;
}

}  // namespace numprobe::scenario
