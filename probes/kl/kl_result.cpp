// kl's result model: what `numprobe kl` and a scenario's kl check report.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/core/result_gates.hpp"
#include "probes/kl/kl_probe.hpp"

namespace numprobe::probes {
namespace {

// Reported for every check (ppl_* only with tokens); any name kl_metric accepts may be gated.
const std::vector<std::string> k_reported = {"kld.mean", "kld.stderr", "kld.median", "kld.p90",
                                             "kld.p99", "kld.p999", "kld.max", "top1",
                                             "topk_overlap", "delta_p.mean", "delta_p.rms",
                                             "delta_p.p01", "delta_p.p99"};

std::string pct(double v) { return fmt::format("{:.3f}%", 100.0 * v); }

// KL by position: one row per bin, then the growth verdict (kl_positions.hpp states its test).
void add_positions_view(const kl_positions& p, result::view_builder& v) {
  using result::sci;
  auto& t = v.add_table({"positions", "rows", "mean KLD", "+-", "99% KLD"},
                        p.seq_len > 0 ? fmt::format("KL by position ({} sequences of {})", p.sequences, p.seq_len)
                                      : std::string("KL by position"));
  for (const auto& b : p.bins)
    t.rows.push_back({fmt::format("{}..{}", b.lo, b.hi), std::to_string(b.rows), sci(b.kld_mean), sci(b.kld_stderr),
                      sci(b.kld_p99)});
  const auto& f = p.fit;
  const auto fit = fmt::format("slope {} nats per 1k positions (t = {:.1f}, r2 = {:.3f}), {} per doubling, "
                               "last/first bin {:.3g}",
                               sci(f.slope_per_1k), f.slope_t, f.r2, sci(f.log2_slope), f.last_over_first);
  if (p.bins.size() < 3)
    v.line("growth    not judged: fewer than 3 position bins; " + fit);
  else
    v.line((f.grows ? "growth    KL grows with position: " : "growth    KL does not grow with position: ") + fit);
}

void add_precision_view(const kl_base_precision& p, double kld_mean, result::view_builder& v) {
  using result::sci;
  if (p.format.empty()) return;
  if (!p.measured) {
    v.line(fmt::format("floor     {} base: {}", p.format, p.basis));
    return;
  }
  v.line(fmt::format("floor     {} base logits: {} +- {} mean KLD; {}", p.format, sci(p.floor_kld_mean),
                     sci(p.floor_kld_stderr), p.basis));
  if (p.at_floor)
    v.line(fmt::format("at the floor: mean KLD {} is below 2x the {} floor; the base's rounding hides smaller "
                       "differences",
                       sci(kld_mean), p.format));
}

// What the terminal shows: llama.cpp's perplexity-tool statistics, then the worst positions.
void add_view(const kl_report& r, result::check_result& out) {
  using result::fixed3;
  using result::sci;
  result::view_builder v(out);
  const auto& s = r.summary;
  v.line(fmt::format("case      {}", r.case_id));
  v.line(fmt::format("base      {} ({})", r.options.base, r.base_dtype));
  v.line(fmt::format("candidate {} ({})", r.options.cand, r.cand_dtype));
  if (r.llama.n_ctx > 0)
    v.line(fmt::format("llama     {} chunks of n_ctx {}: positions {}..{} of each scored; tokens from {}",
                       r.llama.n_chunk, r.llama.n_ctx, r.llama.first_scored,
                       r.llama.first_scored + r.llama.rows_per_chunk - 1, r.tokens_from));
  add_precision_view(r.base_precision, s.kld.mean, v);
  auto& t = v.add_table({"statistic", "value"});
  auto add = [&t](std::string a, std::string b) { t.rows.push_back({std::move(a), std::move(b)}); };
  add("Mean KLD", fmt::format("{} +- {}", sci(s.kld.mean), sci(s.kld.stderr_)));
  add("Maximum KLD", sci(s.kld.max));
  add("99.9% KLD", sci(s.kld.p999));
  add("99% KLD", sci(s.kld.p99));
  add("95% KLD", sci(s.kld.p95));
  add("90% KLD", sci(s.kld.p90));
  add("Median KLD", sci(s.kld.median));
  add("Same top p", fmt::format("{} +- {} ({} of {})", pct(s.top1_agreement), pct(s.top1_stderr), s.top1_same, s.rows));
  add(fmt::format("Top-{} overlap", s.topk), pct(s.topk_overlap));
  // llama.cpp's dp is at the next token, so it needs tokens; without them the rows are kl's
  // own dp at the base's top-1 token, labelled so that neither is read as the other.
  const bool by_token = s.has_tokens;
  const auto& d = by_token ? s.delta_p_token : s.delta_p;
  const std::string tag = by_token ? "" : " (base top-1)";
  add("Mean dp" + tag, fmt::format("{} +- {}", pct(d.mean), pct(d.stderr_)));
  add("RMS dp" + tag, fmt::format("{} +- {}", pct(d.rms), pct(d.rms_stderr)));
  add("Maximum dp" + tag, pct(d.max));
  add("99% dp" + tag, pct(d.p99));
  add("95% dp" + tag, pct(d.p95));
  add("Median dp" + tag, pct(d.median));
  add("5% dp" + tag, pct(d.p05));
  add("1% dp" + tag, pct(d.p01));
  add("Minimum dp" + tag, pct(d.min));
  if (by_token) add("RMS dp (base top-1)", fmt::format("{} +- {}", pct(s.delta_p.rms), pct(s.delta_p.rms_stderr)));
  if (s.has_tokens) {
    add("PPL(base)", fixed3(s.ppl.base));
    add("PPL(cand)", fixed3(s.ppl.cand));
    add("PPL ratio", fmt::format("{:.6f}", s.ppl.ratio));
    add("Mean ln(PPL ratio)", fmt::format("{} +- {}", sci(s.ppl.ln_ratio_mean), sci(s.ppl.ln_ratio_stderr)));
  }
  if (!s.worst.empty()) {
    auto& w = v.add_table({"row", "kld", "top base", "top cand", "p(top)", "q(top)"},
                          "positions with the largest KL(base || cand)");
    for (const auto& p : s.worst)
      w.rows.push_back({std::to_string(p.row), sci(p.kld), std::to_string(p.top_base), std::to_string(p.top_cand),
                        fmt::format("{:.4f}", p.p_base_top), fmt::format("{:.4f}", p.q_base_top)});
  }
  if (r.positions.bins_asked > 0) add_positions_view(r.positions, v);
  v.line(fmt::format("read      {:.0f} MB/s of logits", r.bytes_read / 1e6 / std::max(r.seconds, 1e-9)));
}

}  // namespace

void fill_result(const kl_report& r, const std::vector<bound>& bounds, result::check_result& out) {
  out.backend = "files";
  out.seconds = r.seconds;
  out.case_id = r.case_id;
  for (const auto& n : k_reported)
    out.metrics.push_back({n, kl_metric(r.summary, n), n.rfind("kld.", 0) == 0 ? "nats" : "",
                           n == "top1" || n == "topk_overlap" ? "fixed" : "sci"});
  if (r.summary.has_tokens) {
    out.metrics.push_back({"ppl_ratio", kl_metric(r.summary, "ppl_ratio"), "", "fixed"});
    out.metrics.push_back({"ln_ppl_ratio", kl_metric(r.summary, "ln_ppl_ratio"), "", "sci"});
    for (const char* n : {"delta_p_token.mean", "delta_p_token.rms", "delta_p_token.p01", "delta_p_token.p99"})
      out.metrics.push_back({n, kl_metric(r.summary, n), "", "sci"});
  }
  if (r.positions.bins_asked > 0)
    for (const char* n : {"positions.slope_per_1k", "positions.log2_slope", "positions.r2", "positions.last_over_first"})
      out.metrics.push_back({n, kl_report_metric(r, n), "", "sci"});
  if (r.base_precision.measured)
    for (const char* n : {"base_precision.floor_kld_mean", "base_precision.mean_over_floor"})
      out.metrics.push_back({n, kl_report_metric(r, n), "", "sci"});
  out.metrics.push_back({"rows", static_cast<double>(r.summary.rows), "rows", "int"});
  if (r.positions.bins_asked > 0) {  // the bin means against their centres, for the HTML plot
    result::curve c;
    c.title = "KL by position";
    c.x_label = "position (bin centre)";
    c.y_label = "mean KLD (nats)";
    c.log_x = c.log_y = false;
    result::series line{"kld_mean", {}, {}};
    for (const auto& b : r.positions.bins) {
      line.x.push_back(0.5 * static_cast<double>(b.lo + b.hi));
      line.y.push_back(b.kld_mean);
    }
    c.lines.push_back(std::move(line));
    out.curves.push_back(std::move(c));
  }
  for (const auto& b : bounds) out.gates.push_back(result::evaluate_gate(b, kl_report_metric(r, b.metric), r.case_id));
  out.message = fmt::format("{} rows x {}: KL mean {:.3e} nats, p99 {:.3e}, top-1 agreement {:.4f}",
                            r.summary.rows, r.summary.vocab, r.summary.kld.mean, r.summary.kld.p99,
                            r.summary.top1_agreement);

  add_view(r, out);
  out.details = to_json(r);
}

}  // namespace numprobe::probes
