// `numprobe attention`: one attention case on a backend against the reference.
#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "probes/attention/attention_result.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/dumped_inputs.hpp"
#include "src/core/interrupt.hpp"

namespace numprobe::cli {
void setup_attention(CLI::App& app) {
  auto flags = std::make_shared<case_flags>();
  auto* sub = app.add_subcommand("attention", "one attention case on a backend vs the reference");
  add_case_flags(sub, *flags, "keys S");
  add_report_flags(sub, flags->out);
  add_default_bound_flag(sub, flags->no_default_bound);
  sub->add_option("--inputs", flags->inputs,
                  "judge dumped tensors: DIR with case.json and q/k/v (.npy or inputs.safetensors)");
  sub->add_option("--candidate", flags->candidate, "with --inputs: the dumped output (default DIR/o.npy)");
  sub->callback([flags] {
    const auto& f = *flags;
    std::optional<dumped_attention> dumped;
    if (!f.inputs.empty() || !f.candidate.empty())
      dumped.emplace(load_dumped_attention(f.inputs, f.candidate, make_provider_options(f).tile));
    const attention_case c = dumped ? dumped->inputs.c() : make_case(f, parse_positive(f.seq, "--seq"));
    const auto bounds = gate_bounds(f, make_provider_options(f));
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
    // SIGINT/SIGTERM while the kernel runs: a report that says the case was not measured (exit
    // 130/143), so a CI job finds a report, not a missing file.
    const interrupt_scope defer;
    probes::attention_point p;
    try {
      p = probes::run_attention_point(*prov, c, po);
    } catch (const interrupted& e) {
      result::check_result rc;
      rc.backend = prov->name();
      rc.case_id = c.id();
      rc.message = "the case was not measured";
      rc.details = {{"backend", {{"name", prov->name()}}}, {"case", c.id()}, {"pass", false}};
      exit_status() = 128 + e.signal_number();
      write_command_reports(f.out, "attention", c.seed, std::move(rc), 3, e.signal_number());
      return;
    }

    bool breach = p.nonfinite_total() > 0;  // NaN/Inf in O or LSE is always a finding
    nlohmann::json gates = nlohmann::json::array();
    for (const auto& b : bounds) {
      const auto m = p.metric(b.metric);
      const bool ok = m && b.holds(*m);
      breach |= !ok;
      gates.push_back({{"bound", b.text()}, {"measured", m ? probes::json_number(*m) : nullptr},
                       {"pass", ok}});
      if (b.is_default) gates.back()["default"] = true;
    }
    result::check_result rc;
    rc.backend = prov->name();
    probes::fill_result(p, bounds, rc);
    rc.details = nlohmann::json::object();  // the document's own layout: the point sits under "result"
    rc.details["backend"] = {{"name", prov->name()}, {"metadata", prov->metadata()},
                             {"tile", {{"q", prov->tiles().q}, {"k", prov->tiles().k}}}};
    rc.details["result"] = probes::to_json(p);
    rc.details["gates"] = gates;
    rc.details["pass"] = !breach;
    const int signal = interrupt_signal();  // a signal after the kernel returned: measured, still interrupted
    write_command_reports(f.out, "attention", c.seed, std::move(rc), breach ? 1 : 0, signal);
    exit_status() = signal ? 128 + signal : breach ? 1 : 0;
  });
}

}  // namespace numprobe::cli
