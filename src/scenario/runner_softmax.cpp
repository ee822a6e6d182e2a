// Check runner for `probe = "softmax"`: one long-row softmax/LSE case against the reference, or
// a sweep over the row length across chunk boundaries (`vocab = "A..B"`). The parameters are the
// flags of `numprobe softmax`, with '_' for '-'.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/base/error.hpp"
#include "probes/softmax/softmax_probe.hpp"
#include "src/scenario/attention_params.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

softmax_case make_case(const check_spec& s, std::int64_t vocab, std::int64_t chunk) {
  if (s.has("case")) return parse_softmax_case(s.get_string("case", ""));
  softmax_case c;
  c.vocab = vocab;
  c.rows = s.get_int("rows", 4);
  if (c.rows < 1) throw_input_error(s.place("rows"), "must be >= 1");
  c.dtype = formats::parse_format(s.get_string("dtype", "bf16"), s.place("dtype"));
  c.mask = parse_softmax_mask(s.get_string("mask", "none"), s.place("mask"));
  c.masked = s.get_int("masked", 0);
  if (c.mask == softmax_mask::m_prefix && c.masked == 0) c.masked = std::min(chunk, vocab);
  if (c.masked != 0 && c.mask != softmax_mask::m_padding && c.mask != softmax_mask::m_prefix)
    throw_input_error(s.place("masked"), "needs mask = \"padding\" or \"first-chunk\"");
  c.temperature = s.get_float("temperature", 1.0);
  c.softcap = s.get_float("softcap", 0.0);
  c.dist = parse_dist(s.get_string("dist", "normal"), s.place("dist"));
  c.logit_shift = s.get_float("shift", -2.0e4);
  c.seed = static_cast<std::uint64_t>(s.get_int("seed", 7));
  c.validate();
  return c;
}

std::unique_ptr<softmax_provider> make_provider(const check_spec& s, const run_context& ctx) {
  softmax_provider_options ko;
  ko.backend = ctx.backend_override.empty() ? s.get_string("backend", "emu") : ctx.backend_override;
  // "best" for softmax: the emulated looped kernel (GPU softmax backends register their own
  // names; a scenario that wants one names it).
  if (ko.backend == "best") ko.backend = "emu";
  ko.chunk = s.get_int("chunk", 1024);
  if (ko.chunk < 1) throw_input_error(s.place("chunk"), "must be >= 1");
  ko.faults = s.get_strings("inject");
  ko.exp2 = s.get_bool("exp2", false);
  for (const auto& st : s.get_strings("state")) {
    const auto eq = st.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == st.size())
      throw_input_error(s.place("state"), fmt::format("'{}' is not NAME=DTYPE", st));
    ko.states[st.substr(0, eq)] = st.substr(eq + 1);
  }
  return make_softmax_provider(ko);
}

void run_softmax_check(const check_spec& s, const run_context& ctx, result::check_result& out) {
  const auto vocab = s.get_string("vocab", "131072");
  const auto dots = vocab.find("..");
  const bool sweep = dots != std::string::npos;
  const std::int64_t lo = positive(sweep ? vocab.substr(0, dots) : vocab, s.place("vocab"));
  const std::int64_t hi = sweep ? positive(vocab.substr(dots + 2), s.place("vocab")) : lo;
  if (hi < lo) throw_input_error(s.place("vocab"), fmt::format("need A <= B in A..B, got {}..{}", lo, hi));
  auto kernel = make_provider(s, ctx);
  const softmax_case c = make_case(s, hi, std::max<std::int64_t>(kernel->chunk(), 1));
  probes::softmax_probe_options po;
  po.topk = static_cast<int>(s.get_int("topk", 5));
  if (po.topk < 1 || po.topk > 1000) throw_input_error(s.place("topk"), "must be in [1, 1000]");
  po.end_to_end = !s.get_bool("no_e2e", false);
  out.backend = kernel->name();
  out.case_id = c.id();

  if (!sweep) {
    const auto p = probes::run_softmax_point(*kernel, c, po);
    probes::fill_result(p, s.bounds, out);
    out.details["backend_metadata"] = kernel->metadata();
    return;
  }

  probes::softmax_sweep_options so;
  so.base = c;
  so.vocab_lo = lo;
  so.vocab_hi = hi;
  const auto points = s.get_string("points", "tile");
  so.points = (points == "tile" && kernel->chunk() == 0) ? "log:8" : points;
  so.probe = po;
  so.bounds = s.bounds;
  so.on_point = [&ctx](std::size_t, std::size_t, std::int64_t) {
    if (ctx.interrupted && ctx.interrupted()) throw interrupted_error{};
  };
  const auto r = probes::run_softmax_sweep(*kernel, so);
  probes::fill_result(r, so, out);
  out.details["backend_metadata"] = kernel->metadata();
}

}  // namespace

check_runner softmax_runner() {
  check_runner r;
  r.probe = "softmax";
  r.description = "long-row softmax/LSE vs the reference (vocab = \"A..B\" sweeps across chunks)";
  r.params = {
      {"backend", param_kind::m_string, "ref | emu (best = emu)"},
      {"vocab", param_kind::m_text, "entries per row N, or \"A..B\" to sweep the row length"},
      {"rows", param_kind::m_int, "rows (positions)"},
      {"chunk", param_kind::m_int, "entries per loop iteration of the looped kernel"},
      {"mask", param_kind::m_string, "none | padding | banned | first-chunk | all"},
      {"masked", param_kind::m_int, "padding / first-chunk: masked entries"},
      {"temperature", param_kind::m_float, "sampling temperature"},
      {"softcap", param_kind::m_float, "final-logit softcap (0: off)"},
      {"dtype", param_kind::m_string, "logits dtype as the kernel reads them"},
      {"dist", param_kind::m_string, "logit distribution"},
      {"shift", param_kind::m_float, "logit shift for dist = shifted"},
      {"seed", param_kind::m_int, "input seed"},
      {"inject", param_kind::m_strings, "emu fault(s)"},
      {"state", param_kind::m_strings, "emu state dtypes NAME=DTYPE"},
      {"exp2", param_kind::m_bool, "exp as exp2(x*log2e)"},
      {"topk", param_kind::m_int, "k of the top-k agreement"},
      {"points", param_kind::m_string, "sweep points: tile | log:N | comma list"},
      {"case", param_kind::m_string, "an exact softmax case id"},
      {"no_e2e", param_kind::m_bool, "skip the end-to-end reference"},
  };
  r.known_metric = [](const std::string& m) {
    const auto& n = probes::softmax_metric_names();
    return m == "growth.slope" || std::find(n.begin(), n.end(), m) != n.end();
  };
  r.metric_names = "growth.slope (sweeps), and every point metric (worst point): ";
  for (const auto& n : probes::softmax_metric_names()) r.metric_names += n + " ";
  r.run = run_softmax_check;
  return r;
}

}  // namespace numprobe::scenario
