// `numprobe attention`: one attention case on a backend against the reference.
#include <fmt/format.h>
#include <memory>

#include "numprobe/core/error.hpp"
#include "probes/attention_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/dumped_inputs.hpp"
#include "src/cli/table.hpp"

namespace numprobe::cli {
namespace {

void print_point(const probes::attention_point& p, const attention_provider& prov,
                 const std::vector<bound>& bounds) {
  fmt::print("case      {}\n", p.case_id);
  fmt::print("backend   {}\n", prov.name());
  fmt::print("rows      {} of {} query rows{} (x {} heads)\n\n", p.rows_evaluated,
             p.queries, p.rows_evaluated < p.queries ? " (stratified sample)" : "",
             p.kernel.per_row.empty() ? 0 : p.kernel.per_row.size() / std::max<std::size_t>(1, p.rows_evaluated));
  // NaN/Inf first and on one line: it is the finding, and the table below reads inf throughout.
  if (p.nonfinite.total() > 0) fmt::print("NaN/Inf   {}\n\n", p.nonfinite.summary());
  text_table t({"metric", "kernel", "naive", "end-to-end"});
  auto row = [&](const char* name, auto get) {
    t.add({name, sci(get(p.kernel)), sci(get(p.naive)),
           p.end_to_end ? sci(get(*p.end_to_end)) : std::string("-")});
  };
  row("rel_rms", [](const auto& e) { return e.rel_rms; });
  row("max_abs", [](const auto& e) { return e.max_abs; });
  row("max_rel", [](const auto& e) { return e.max_rel; });
  row("max_ulp", [](const auto& e) { return e.max_ulp; });
  row("lse_max_abs", [](const auto& e) { return e.lse_max_abs; });
  t.add({"nan/inf", fmt::format("{}/{}", p.kernel.nan_count, p.kernel.inf_count),
         fmt::format("{}/{}", p.naive.nan_count, p.naive.inf_count),
         p.end_to_end ? fmt::format("{}/{}", p.end_to_end->nan_count, p.end_to_end->inf_count) : "-"});
  auto lse_counts = [](const auto& e) {
    return e.lse_known ? fmt::format("{}/{}", e.lse_nan_count, e.lse_inf_count) : std::string("no LSE");
  };
  t.add({"lse nan/inf", lse_counts(p.kernel), lse_counts(p.naive),
         p.end_to_end ? lse_counts(*p.end_to_end) : "-"});
  t.print();
  fmt::print("\nratio_to_naive  {}   (kernel rel_rms / naive same-precision rel_rms; healthy <= 2)\n",
             fixed3(p.ratio_to_naive));
  if (!p.worst.empty()) {
    fmt::print("\nworst rows (vs reference on the same rounded inputs):\n");
    text_table w({"row", "head", "q_tile", "k_tile", "keys", "rel_rms", "max_abs", "lse_abs"});
    for (const auto& r : p.worst)
      w.add({std::to_string(r.row), std::to_string(r.head), std::to_string(r.query_tile),
             std::to_string(r.key_tile), std::to_string(r.keys), sci(r.rel_rms), sci(r.max_abs),
             sci(r.lse_abs)});
    w.print();
  }
  for (const auto& b : bounds) {
    const auto m = p.metric(b.metric);
    fmt::print("{} {}  measured {}\n", m && b.holds(*m) ? "PASS" : "FAIL", b.text(),
               m ? sci(*m) : std::string("n/a"));
  }
  if (p.nonfinite_total() > 0)
    fmt::print("FAIL the candidate output holds NaN or Inf ({} NaN, {} Inf in O; {} NaN, {} Inf in LSE)\n",
               p.kernel.nan_count, p.kernel.inf_count, p.kernel.lse_nan_count, p.kernel.lse_inf_count);
}

}  // namespace

void setup_attention(CLI::App& app) {
  auto flags = std::make_shared<case_flags>();
  auto* sub = app.add_subcommand("attention", "one attention case on a backend vs the reference");
  add_case_flags(sub, *flags, "keys S");
  add_report_flags(sub, flags->out);
  sub->add_option("--inputs", flags->inputs,
                  "judge dumped tensors: DIR with case.json and q/k/v (.npy or inputs.safetensors)");
  sub->add_option("--candidate", flags->candidate, "with --inputs: the dumped output (default DIR/o.npy)");
  sub->callback([flags] {
    const auto& f = *flags;
    std::optional<dumped_attention> dumped;
    if (!f.inputs.empty() || !f.candidate.empty())
      dumped.emplace(load_dumped_attention(f.inputs, f.candidate, make_provider_options(f).tile));
    const attention_case c = dumped ? dumped->inputs.c() : make_case(f, parse_positive(f.seq, "--seq"));
    const auto bounds = make_bounds(f);
    for (const auto& b : bounds) {
      probes::attention_point probe_point;
      if (!probe_point.metric(b.metric) && b.metric.rfind("e2e.", 0) != 0)
        throw_input_error("--bound", fmt::format("unknown metric '{}' for attention", b.metric));
    }
    auto prov = dumped ? std::move(dumped->candidate) : make_attention_provider(make_provider_options(f));
    probes::attention_probe_options po;
    if (dumped) po.inputs = &dumped->inputs;
    po.sampling = make_sampling(f, c.t() <= 1024 ? 0 : 256);
    po.end_to_end = !f.no_e2e;
    const auto p = probes::run_attention_point(*prov, c, po);

    bool breach = p.nonfinite_total() > 0;  // NaN/Inf in O or LSE is always a finding
    nlohmann::json gates = nlohmann::json::array();
    for (const auto& b : bounds) {
      const auto m = p.metric(b.metric);
      const bool ok = m && b.holds(*m);
      breach |= !ok;
      gates.push_back({{"bound", b.text()}, {"measured", m ? probes::json_number(*m) : nullptr},
                       {"pass", ok}});
    }
    if (!f.out.to_stdout()) print_point(p, *prov, bounds);
    result::check_result rc;
    rc.backend = prov->name();
    probes::fill_result(p, bounds, rc);
    rc.details = nlohmann::json::object();  // the document's own layout: the point sits under "result"
    rc.details["backend"] = {{"name", prov->name()}, {"metadata", prov->metadata()},
                             {"tile", {{"q", prov->tiles().q}, {"k", prov->tiles().k}}}};
    rc.details["result"] = probes::to_json(p);
    rc.details["gates"] = gates;
    rc.details["pass"] = !breach;
    write_command_reports(f.out, "attention", c.seed, std::move(rc), breach ? 1 : 0);
    exit_status() = breach ? 1 : 0;
  });
}

}  // namespace numprobe::cli
