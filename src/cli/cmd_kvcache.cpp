// `numprobe kvcache`: the FP8 KV-cache study (issue 9). Clipping against rounding error of an
// fp8 KV cache, per format, scale layout, scale multiplier and context length, with outlier
// tokens that only long contexts contain.
#include <cmath>
#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "probes/kvcache/kvcache_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"

namespace numprobe::cli {

void setup_kvcache(CLI::App& app) {
  struct flags_t {
    std::string seq = "1024,4096,16384,65536,131072";
    std::string formats = "e4m3fn,e4m3fnuz,e5m2";
    std::string layouts = "tensor,head,channel,token";
    std::string mults = "2^-4,2^-2,1,2^2,2^4";
    std::string dist = "llm";
    std::string dtype = "bf16";
    std::int64_t queries = 2, heads = 4, kv_heads = 2, head_dim = 64, calib = 4096, outlier_after = 16384;
    double outlier_rate = 1e-4, outlier_scale = 64.0, bound = 0.0;
    std::uint64_t seed = 7;
    report_flags out;  // --json, --csv, --md, --html, --junit
    bool all = false;
  };
  auto f = std::make_shared<flags_t>();
  auto* sub = app.add_subcommand("kvcache", "fp8 KV cache: clipping vs rounding error by scale, layout and length");
  sub->add_option("--seq", f->seq, "context lengths, comma list (up to 131072 and beyond)")->capture_default_str();
  sub->add_option("--kv-format", f->formats, "fp8 formats, comma list: e4m3fn|e4m3fnuz|e5m2|e5m2fnuz")
      ->capture_default_str();
  sub->add_option("--kv-scale", f->layouts, "scale layouts, comma list: tensor|head|channel|token")
      ->capture_default_str();
  sub->add_option("--scale-mult", f->mults, "multipliers of the amax-based scale, comma list (2^k or numbers)")
      ->capture_default_str();
  sub->add_option("--calib", f->calib, "static scales from the first N tokens (0: the whole context)")
      ->capture_default_str();
  sub->add_option("--dist", f->dist, "K/V distribution: llm|normal|uniform|...")->capture_default_str();
  sub->add_option("--outlier-rate", f->outlier_rate, "outlier tokens per token past --outlier-after")
      ->capture_default_str();
  sub->add_option("--outlier-after", f->outlier_after, "outlier tokens appear only at positions >= this")
      ->capture_default_str();
  sub->add_option("--outlier-scale", f->outlier_scale, "an outlier token's K and V rows are multiplied by this")
      ->capture_default_str();
  sub->add_option("--queries", f->queries, "query vectors per head")->capture_default_str();
  sub->add_option("--heads", f->heads, "query heads")->capture_default_str();
  sub->add_option("--kv-heads", f->kv_heads, "KV heads")->capture_default_str();
  sub->add_option("--head-dim", f->head_dim, "head dimension")->capture_default_str();
  sub->add_option("--dtype", f->dtype, "dtype of the K/V activations before the cache")->capture_default_str();
  sub->add_option("--seed", f->seed, "input seed")->check(seed_validator())->capture_default_str();
  auto* bound_opt = sub->add_option("--bound", f->bound, "output rel_rms bound > 0 (default: 2x the configuration's rounding-only error at the shortest length)");
  sub->add_flag("--all", f->all, "table: every multiplier at every length");
  add_report_flags(sub, f->out);
  sub->callback([f, bound_opt] {
    probes::kvcache_options o;
    probes::set_kvcache_lists(o, f->seq, f->formats, f->layouts, f->mults,
                              [](const std::string& key) { return "--" + key; });
    o.calib = f->calib;
    o.outlier_rate = f->outlier_rate;
    o.outlier_after = f->outlier_after;
    o.outlier_scale = f->outlier_scale;
    // An explicit --bound must be a usable number: 0 used to mean "the default" silently.
    const bool bound_given = bound_opt->count() > 0;
    if (bound_given && !(f->bound > 0 && std::isfinite(f->bound)))
      throw_input_error("--bound", fmt::format("must be a finite rel_rms > 0, got {} (leave --bound out for "
                                               "the default: 2x the rounding-only error)", f->bound));
    if (bound_given) o.bound = f->bound;
    o.base.dist = parse_dist(f->dist);
    o.base.dtype = formats::parse_format(f->dtype, "--dtype");
    o.base.queries = f->queries;
    o.base.heads = f->heads;
    o.base.kv_heads = f->kv_heads;
    o.base.head_dim = f->head_dim;
    o.base.seed = f->seed;
    if (f->queries < 1 || f->queries > 64) throw_input_error("--queries", "must be in [1, 64]");
    const auto r = probes::run_kvcache(o);
    // A study reports failing configurations; only an explicit --bound gates the exit code.
    exit_status() = bound_given && r.summary.failures > 0 ? 1 : 0;
    result::check_result c;
    probes::fill_result(r, {}, c, f->all);
    write_command_reports(f->out, "kvcache", f->seed, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
