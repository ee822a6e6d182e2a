// `numprobe kl BASE CAND`: KL divergence, top-1 agreement, delta p and top-k overlap of two
// logit tensors, with llama.cpp's perplexity-tool statistics and gates.
//
// JSON (--json PATH|-): the envelope plus nested objects, so the dotted names are
// paths: kld.p99 is j["kld"]["p99"], delta_p.rms is j["delta_p"]["rms"]; top1_agreement is a
// top-level number. --bound uses the dotted names (kld.p99<=0.05, top1>=0.9).
#include <fmt/format.h>
#include <memory>

#include "numprobe/core/error.hpp"
#include "probes/kl_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"
#include "src/cli/progress.hpp"
#include "src/cli/table.hpp"

namespace numprobe::cli {
namespace {

struct kl_flags {
  std::string base, cand, tokens;
  report_flags out;  // --json, --csv, --md, --html, --junit
  std::vector<std::string> bounds;
  int topk = 10;
  std::size_t worst = 10;
  unsigned threads = 0;
};

std::string pct(double v) { return fmt::format("{:.3f}%", 100.0 * v); }

void print_report(const probes::kl_report& r) {
  const auto& s = r.summary;
  fmt::print("case      {}\n", r.case_id);
  fmt::print("base      {} ({})\ncandidate {} ({})\n\n", r.options.base, r.base_dtype,
             r.options.cand, r.cand_dtype);
  text_table t({"statistic", "value"});
  t.add({"Mean KLD", fmt::format("{} +- {}", sci(s.kld.mean), sci(s.kld.stderr_))});
  t.add({"Median KLD", sci(s.kld.median)});
  t.add({"90% KLD", sci(s.kld.p90)});
  t.add({"99% KLD", sci(s.kld.p99)});
  t.add({"99.9% KLD", sci(s.kld.p999)});
  t.add({"Maximum KLD", sci(s.kld.max)});
  t.add({"Same top p", fmt::format("{} +- {} ({} of {})", pct(s.top1_agreement),
                                   pct(s.top1_stderr), s.top1_same, s.rows)});
  t.add({fmt::format("Top-{} overlap", s.topk), pct(s.topk_overlap)});
  const auto& d = s.delta_p;
  t.add({"Mean dp", fmt::format("{} +- {}", pct(d.mean), pct(d.stderr_))});
  t.add({"RMS dp", pct(d.rms)});
  t.add({"Maximum dp", pct(d.max)});
  t.add({"99% dp", pct(d.p99)});
  t.add({"95% dp", pct(d.p95)});
  t.add({"Median dp", pct(d.median)});
  t.add({"5% dp", pct(d.p05)});
  t.add({"1% dp", pct(d.p01)});
  t.add({"Minimum dp", pct(d.min)});
  if (s.has_tokens) {
    t.add({"PPL(base)", fixed3(s.ppl.base)});
    t.add({"PPL(cand)", fixed3(s.ppl.cand)});
    t.add({"PPL ratio", fmt::format("{:.6f}", s.ppl.ratio)});
    t.add({"Mean ln(PPL ratio)", fmt::format("{} +- {}", sci(s.ppl.ln_ratio_mean),
                                             sci(s.ppl.ln_ratio_stderr))});
  }
  t.print();
  if (!s.worst.empty()) {
    fmt::print("\npositions with the largest KL\n");
    text_table w({"row", "kld", "top base", "top cand", "p(top)", "q(top)"});
    for (const auto& p : s.worst)
      w.add({std::to_string(p.row), sci(p.kld), std::to_string(p.top_base),
             std::to_string(p.top_cand), fmt::format("{:.4f}", p.p_base_top),
             fmt::format("{:.4f}", p.q_base_top)});
    w.print();
  }
  for (const auto& b : r.breaches) fmt::print("FAIL {}  measured {}\n", b.bound, sci(b.measured));
  fmt::print("time      {:.2f} s ({:.0f} MB/s of logits)\n", r.seconds,
             r.bytes_read / 1e6 / std::max(r.seconds, 1e-9));
}

}  // namespace

void setup_kl(CLI::App& app) {
  auto f = std::make_shared<kl_flags>();
  auto* sub = app.add_subcommand(
      "kl", "KL divergence, top-1 agreement and delta p of two [N, V] logit tensors");
  sub->add_option("base", f->base, "base logits: PATH[:TENSOR] (.npy or .safetensors)")->required();
  sub->add_option("cand", f->cand, "candidate logits: PATH[:TENSOR]")->required();
  sub->add_option("--tokens", f->tokens, "N token ids (PATH[:TENSOR]) for the perplexity ratio");
  sub->add_option("--topk", f->topk, "k of the top-k overlap")->capture_default_str();
  sub->add_option("--worst", f->worst, "positions with the largest KL to list")->capture_default_str();
  sub->add_option("--threads", f->threads, "worker threads (0: all cores)")->capture_default_str();
  sub->add_option("--bound", f->bounds,
                  "gate, e.g. kld.p99<=0.05 or top1>=0.9 (repeatable; exit 1 on breach)");
  add_report_flags(sub, f->out);
  sub->callback([f] {
    probes::kl_probe_options o;
    o.base = f->base;
    o.cand = f->cand;
    o.tokens = f->tokens;
    if (f->topk < 1) throw_input_error("--topk", fmt::format("must be at least 1, got {}", f->topk));
    o.topk = f->topk;
    o.worst = f->worst;
    o.threads = f->threads;
    for (const auto& b : f->bounds) o.bounds.push_back(parse_bound(b));
    progress_bar bar;
    o.progress = [&bar](std::int64_t done, std::int64_t total) {
      bar.update(static_cast<std::size_t>(done), static_cast<std::size_t>(total), "rows");
    };
    const auto r = probes::run_kl(o);
    bar.finish();
    if (!f->out.to_stdout()) print_report(r);
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
