// `numprobe kl BASE CAND`: KL divergence, top-1 agreement, delta p and top-k overlap of two
// logit tensors, with llama.cpp's perplexity-tool statistics and gates.
//
// JSON (--json PATH|-): the envelope plus nested objects, so the dotted names are
// paths: kld.p99 is j["kld"]["p99"], delta_p.rms is j["delta_p"]["rms"]; top1_agreement is a
// top-level number. --bound uses the dotted names (kld.p99<=0.05, top1>=0.9).
// --positions N adds positions.bins[] and positions.fit (probes/kl/kl_positions.hpp); a bf16 or
// f16 base adds base_precision (probes/kl/kl_precision_floor.hpp). BASE, CAND or --tokens may be
// a llama-perplexity --kl-divergence-base file (io/llama_kl_base.hpp; docs/kl.md): its stored
// log-probs are compared with llama.cpp's KL, and its tokens are the default --tokens.
#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "probes/kl/kl_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"
#include "src/cli/progress.hpp"

namespace numprobe::cli {
namespace {

struct kl_flags {
  std::string base, cand, tokens;
  report_flags out;  // --json, --csv, --md, --html, --junit
  std::vector<std::string> bounds;
  int topk = 10;
  std::size_t worst = 10;
  unsigned threads = 0;
  std::int64_t positions = 0, seq_len = 0;
};

}  // namespace

void setup_kl(CLI::App& app) {
  auto f = std::make_shared<kl_flags>();
  auto* sub = app.add_subcommand(
      "kl", "KL divergence, top-1 agreement and delta p of two [N, V] logit tensors");
  sub->add_option("base", f->base,
                  "base logits: PATH[:TENSOR] (.npy or .safetensors), or a llama-perplexity "
                  "--kl-divergence-base file")
      ->required();
  sub->add_option("cand", f->cand, "candidate logits: PATH[:TENSOR], or a --kl-divergence-base file")->required();
  sub->add_option("--tokens", f->tokens,
                  "N token ids (PATH[:TENSOR], or a --kl-divergence-base file) for the perplexity ratio "
                  "and llama.cpp's dp; default: those of a --kl-divergence-base input");
  sub->add_option("--topk", f->topk, "k of the top-k overlap")->capture_default_str();
  sub->add_option("--worst", f->worst, "positions with the largest KL to list")->capture_default_str();
  sub->add_option("--threads", f->threads, "worker threads (0: all cores)")->capture_default_str();
  auto* positions = sub->add_option("--positions", f->positions,
                                    "KL mean and p99 in N position bins (rows in sequence order), with a growth fit");
  auto* seq_len = sub->add_option("--seq-len", f->seq_len,
                                  "positions per sequence when the rows hold several (row r is position r % L)");
  sub->add_option("--bound", f->bounds,
                  "gate, e.g. kld.p99<=0.05, top1>=0.9 or positions.last_over_first<=2 (repeatable; exit 1 on "
                  "breach)");
  add_report_flags(sub, f->out);
  sub->callback([f, positions, seq_len] {
    probes::kl_probe_options o;
    o.base = f->base;
    o.cand = f->cand;
    o.tokens = f->tokens;
    if (f->topk < 1) throw_input_error("--topk", fmt::format("must be at least 1, got {}", f->topk));
    o.topk = f->topk;
    o.worst = f->worst;
    o.threads = f->threads;
    // 0 is the probe's "off"; on the command line it is a mistake, named here.
    if (positions->count() > 0 && f->positions < 1)
      throw_input_error("--positions", fmt::format("must be at least 1, got {}", f->positions));
    if (seq_len->count() > 0 && f->seq_len < 1)
      throw_input_error("--seq-len", fmt::format("must be at least 1, got {}", f->seq_len));
    o.positions = f->positions;
    o.seq_len = f->seq_len;
    for (const auto& b : f->bounds) o.bounds.push_back(parse_bound(b));
    progress_bar bar;
    o.progress = [&bar](std::int64_t done, std::int64_t total) {
      bar.update(static_cast<std::size_t>(done), static_cast<std::size_t>(total), "rows");
    };
    const auto r = probes::run_kl(o);
    bar.finish();
    exit_status() = r.breaches.empty() ? 0 : 1;
    result::check_result c;
    probes::fill_result(r, o.bounds, c);
    c.details["bounds"] = nlohmann::json::array();
    for (const auto& b : o.bounds) c.details["bounds"].push_back(b.text());
    c.details["pass"] = r.breaches.empty();
    write_command_reports(f->out, "kl", 0, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
