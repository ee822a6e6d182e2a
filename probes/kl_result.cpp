// kl's result model: what `numprobe kl` and a scenario's kl check report.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/core/result_gates.hpp"
#include "probes/kl_probe.hpp"

namespace numprobe::probes {
namespace {

// Reported for every check (ppl_* only with tokens); any name kl_metric accepts may be gated.
const std::vector<std::string> k_reported = {"kld.mean", "kld.stderr", "kld.median", "kld.p90",
                                             "kld.p99", "kld.p999", "kld.max", "top1",
                                             "topk_overlap", "delta_p.mean", "delta_p.rms",
                                             "delta_p.p01", "delta_p.p99"};

}  // namespace

void fill_result(const kl_report& r, const std::vector<bound>& bounds, result::check_result& out) {
  out.backend = "files";
  out.case_id = r.case_id;
  for (const auto& n : k_reported)
    out.metrics.push_back({n, kl_metric(r.summary, n), n.rfind("kld.", 0) == 0 ? "nats" : "",
                           n == "top1" || n == "topk_overlap" ? "fixed" : "sci"});
  if (r.summary.has_tokens) {
    out.metrics.push_back({"ppl_ratio", kl_metric(r.summary, "ppl_ratio"), "", "fixed"});
    out.metrics.push_back({"ln_ppl_ratio", kl_metric(r.summary, "ln_ppl_ratio"), "", "sci"});
  }
  out.metrics.push_back({"rows", static_cast<double>(r.summary.rows), "rows", "int"});
  for (const auto& b : bounds) out.gates.push_back(result::evaluate_gate(b, kl_metric(r.summary, b.metric), r.case_id));
  out.message = fmt::format("{} rows x {}: KL mean {:.3e} nats, p99 {:.3e}, top-1 agreement {:.4f}",
                            r.summary.rows, r.summary.vocab, r.summary.kld.mean, r.summary.kld.p99,
                            r.summary.top1_agreement);

  result::table worst{"positions with the largest KL(base || cand)",
                      {"row", "kld", "top base", "top cand", "p(base top)", "q(base top)"}, {}};
  for (const auto& w : r.summary.worst)
    worst.rows.push_back({std::to_string(w.row), result::format_value(w.kld, "sci"), std::to_string(w.top_base),
                          std::to_string(w.top_cand), result::format_value(w.p_base_top, "fixed"),
                          result::format_value(w.q_base_top, "fixed")});
  if (!worst.rows.empty()) out.tables.push_back(std::move(worst));
  out.details = to_json(r);
}

}  // namespace numprobe::probes
