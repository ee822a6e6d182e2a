// Check runner for `probe = "kvcache"`: the fp8 KV-cache study of `numprobe kvcache` (clipping
// against rounding error by format, scale layout, scale multiplier and context length). The keys
// are the command's flags with '_' for '-'; a bound on out_rel_rms sets the study's per-point
// bound (the check fails when any configuration breaks it), other bounds gate the study metrics.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "probes/kvcache/kvcache_probe.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

void run_kvcache_check(const check_spec& s, const run_context& ctx, result::check_result& out) {
  if (!ctx.backend_override.empty() && ctx.backend_override != "emu" && ctx.backend_override != "best")
    throw_input_error("--backend", fmt::format("the kvcache study runs on the emulator, not '{}'", ctx.backend_override));
  probes::kvcache_options o;
  probes::set_kvcache_lists(o, s.get_string("seq", "1024,4096,16384,65536,131072"),
                            s.get_string("kv_format", "e4m3fn,e4m3fnuz,e5m2"),
                            s.get_string("kv_scale", "tensor,head,channel,token"),
                            s.get_string("scale_mult", "2^-4,2^-2,1,2^2,2^4"), [&s](const std::string& key) {
                              std::string k = key;
                              std::replace(k.begin(), k.end(), '-', '_');
                              return s.place(k);
                            });
  o.calib = s.get_int("calib", 4096);
  o.outlier_rate = s.get_float("outlier_rate", 1e-4);
  o.outlier_after = s.get_int("outlier_after", 16384);
  o.outlier_scale = s.get_float("outlier_scale", 64.0);
  o.base.dist = parse_dist(s.get_string("dist", "llm"), s.place("dist"));
  o.base.dtype = formats::parse_format(s.get_string("dtype", "bf16"), s.place("dtype"));
  o.base.queries = s.get_int("queries", 2);
  o.base.heads = s.get_int("heads", 4);
  o.base.kv_heads = s.get_int("kv_heads", 2);
  o.base.head_dim = s.get_int("head_dim", 64);
  o.base.seed = static_cast<std::uint64_t>(s.get_int("seed", 7));
  if (o.base.queries < 1 || o.base.queries > 64) throw_input_error(s.place("queries"), "must be in [1, 64]");
  std::vector<bound> others;
  for (const auto& b : s.bounds) {
    if (b.metric != "out_rel_rms") {
      others.push_back(b);
      continue;
    }
    if (b.op != bound_op::m_le && b.op != bound_op::m_lt)
      throw_input_error(s.place("bounds"), "out_rel_rms takes an upper bound (out_rel_rms<=X)");
    o.bound = b.value;
  }
  const auto r = probes::run_kvcache(o);
  probes::fill_result(r, others, out);
}

}  // namespace

check_runner kvcache_runner() {
  using K = param_kind;
  check_runner r;
  r.probe = "kvcache";
  r.description = "fp8 KV cache: clipping vs rounding error by scale, layout and length";
  r.params = {{"seq", K::m_string, "context lengths, comma list"},
              {"kv_format", K::m_string, "fp8 formats, comma list: e4m3fn|e4m3fnuz|e5m2"},
              {"kv_scale", K::m_string, "scale layouts, comma list: tensor|head|channel|token"},
              {"scale_mult", K::m_string, "multipliers of the amax-based scale, comma list (2^k or numbers)"},
              {"calib", K::m_int, "static scales from the first N tokens (0: the whole context)"},
              {"dist", K::m_string, "K/V distribution"},
              {"outlier_rate", K::m_float, "outlier tokens per token past outlier_after"},
              {"outlier_after", K::m_int, "outlier tokens appear only at positions >= this"},
              {"outlier_scale", K::m_float, "an outlier token's K and V rows are multiplied by this"},
              {"queries", K::m_int, "query vectors per head"},
              {"heads", K::m_int, "query heads"},
              {"kv_heads", K::m_int, "KV heads"},
              {"head_dim", K::m_int, "head dimension"},
              {"dtype", K::m_string, "dtype of the K/V activations before the cache"},
              {"seed", K::m_int, "input seed"}};
  r.known_metric = [](const std::string& m) {
    const auto& n = probes::kvcache_metric_names();
    return m == "out_rel_rms" || std::find(n.begin(), n.end(), m) != n.end();
  };
  r.metric_names = "out_rel_rms (every configuration), failures, clip_driven, round_driven, worst.out_rel_rms";
  r.run = run_kvcache_check;
  return r;
}

}  // namespace numprobe::scenario
