// `numprobe softmax`: one long-row softmax/LSE case (or a sweep over the row length) on a
// backend against the reference. Exit 1 when a NaN/Inf appears or a bound is breached.
#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "numprobe/core/memory_budget.hpp"
#include "probes/point/attention_probe.hpp"  // json_number
#include "probes/softmax/softmax_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"
#include "src/cli/progress.hpp"

namespace numprobe::cli {
namespace {

struct softmax_flags {
  std::string backend = "emu";
  double exec_timeout = 60.0;  // exec:CMD
  bool keep = false;
  bool exec_worker = false;
  std::string vocab = "128256";  // N, or A..B for a sweep
  std::int64_t rows = 4;
  std::int64_t chunk = 1024;
  std::string mask = "none";
  std::int64_t masked = 0;
  double temperature = 1.0;
  double softcap = 0.0;
  std::string dtype = "bf16";
  std::string dist = "normal";
  double shift = -2.0e4;
  std::uint64_t seed = 7;
  std::vector<std::string> inject;
  std::vector<std::string> states;
  bool exp2 = false;
  int topk = 5;
  std::string points = "tile";
  std::string case_id;
  std::vector<std::string> bounds;
  bool no_default_bound = false;
  report_flags out;  // --json, --csv, --md, --html, --junit
  bool no_e2e = false;
};

softmax_case make_softmax_case(const softmax_flags& f, std::int64_t vocab) {
  if (!f.case_id.empty()) return parse_softmax_case(f.case_id);
  softmax_case c;
  c.vocab = vocab;
  c.rows = f.rows;
  c.dtype = formats::parse_format(f.dtype, "--dtype");
  c.mask = parse_softmax_mask(f.mask);
  c.masked = f.masked;
  if (f.masked < 0 || f.masked > vocab)
    throw_input_error("--masked", fmt::format("{} masked entries do not fit a row of {} (--vocab)", f.masked, vocab));
  // first-chunk without --masked masks exactly the kernel's first chunk.
  if (c.mask == softmax_mask::m_prefix && c.masked == 0) c.masked = std::min(f.chunk, vocab);
  if (f.masked != 0 && c.mask != softmax_mask::m_padding && c.mask != softmax_mask::m_prefix)
    throw_input_error("--masked", "--masked needs --mask padding or first-chunk");
  c.temperature = f.temperature;
  c.softcap = f.softcap;
  c.dist = parse_dist(f.dist);
  c.logit_shift = f.shift;
  c.seed = f.seed;
  c.validate();
  return c;
}

}  // namespace

void setup_softmax(CLI::App& app) {
  auto f = std::make_shared<softmax_flags>();
  auto* sub = app.add_subcommand("softmax", "one long-row softmax/LSE case vs the reference (or a sweep over --vocab A..B)");
  sub->add_option("--backend", f->backend, "ref|emu|cuda|exec:'CMD {in}'|exec-worker:'CMD' (examples/exec)")->capture_default_str();
  sub->add_flag("--exec-worker", f->exec_worker, "exec:CMD is a worker (one process per sweep, line protocol)");
  sub->add_option("--exec-timeout", f->exec_timeout, "exec:'CMD' backend: seconds per case")->capture_default_str();
  sub->add_flag("--keep", f->keep, "exec:'CMD' backend: keep each case's directory");
  sub->add_option("--vocab", f->vocab, "entries per row N, or A..B to sweep the row length")->capture_default_str();
  sub->add_option("--rows", f->rows, "rows (positions)")->capture_default_str();
  sub->add_option("--chunk", f->chunk, "emu: entries per loop iteration of the looped kernel")->capture_default_str();
  sub->add_option("--mask", f->mask, "none|padding|banned|first-chunk|all")->capture_default_str();
  sub->add_option("--masked", f->masked, "padding/first-chunk: masked entries (default: 1+V/16; first-chunk: --chunk)");
  sub->add_option("--temperature", f->temperature, "sampling temperature (z / T)")->capture_default_str();
  sub->add_option("--softcap", f->softcap, "final-logit softcap (0: off)");
  sub->add_option("--dtype", f->dtype, "logits dtype as the kernel reads them")->capture_default_str();
  sub->add_option("--dist", f->dist, "logits: normal|uniform|llm|rescale-stress|max-first|diffuse|shifted")
      ->capture_default_str();
  sub->add_option("--shift", f->shift, "logit shift for --dist shifted")->capture_default_str();
  sub->add_option("--seed", f->seed, "input seed")->check(seed_validator())->capture_default_str();
  sub->add_option("--inject", f->inject, "emu fault: no-empty-guard|rowsum-bf16|finite-sentinel (repeatable)");
  sub->add_option("--state", f->states, "emu state dtype NAME=DTYPE (x,m,l,out,lse)");
  sub->add_flag("--exp2", f->exp2, "emu: exp as exp2(x*log2e) with an fp32 prescale");
  sub->add_option("--topk", f->topk, "k of the top-k agreement")->capture_default_str();
  sub->add_option("--points", f->points, "sweep: tile (k*C-1,k*C,k*C+1) | log:N | comma list")->capture_default_str();
  sub->add_option("--case", f->case_id, "rerun exactly this case id");
  sub->add_option("--bound", f->bounds, "gate METRIC<=X (repeatable); breach exits 1");
  add_report_flags(sub, f->out);
  sub->add_flag("--no-default-bound", f->no_default_bound,
                "without --bound: report only, do not gate on the default bound ratio_to_naive<=2");
  sub->add_flag("--no-e2e", f->no_e2e, "skip the end-to-end (unrounded logits) reference");
  sub->callback([f] {
    if (f->topk < 1 || f->topk > 1000) throw_input_error("--topk", "must be in [1, 1000]");
    const auto dots = f->vocab.find("..");
    const bool sweep = dots != std::string::npos;
    const std::int64_t lo = parse_positive(sweep ? f->vocab.substr(0, dots) : f->vocab, "--vocab");
    const std::int64_t hi = sweep ? parse_positive(f->vocab.substr(dots + 2), "--vocab") : lo;
    if (hi < lo) throw_input_error("--vocab", fmt::format("need A <= B in A..B, got {}..{}", lo, hi));
    const softmax_case c = make_softmax_case(*f, hi);  // validates the flags at the longest row
    // Before any allocation: per entry, the logits (rounded, and exact for the end-to-end
    // reference) and p and log p in double for the candidate, the reference, the naive baseline
    // and the end-to-end reference.
    check_memory("--rows/--vocab", fmt::format("{} rows x {} entries", c.rows, hi),
                 static_cast<double>(c.rows) * static_cast<double>(hi) * (f->no_e2e ? 56.0 : 80.0));
    std::vector<bound> bounds;
    for (const auto& b : f->bounds) bounds.push_back(parse_bound(b));
    if (bounds.empty() && !f->no_default_bound) bounds.push_back(probes::default_softmax_bound());
    probes::softmax_point probe_point;
    for (const auto& b : bounds)
      if (!probe_point.metric(b.metric) && b.metric.rfind("e2e.", 0) != 0 &&
          !(sweep && b.metric == "growth.slope"))
        throw_input_error("--bound", fmt::format("unknown metric '{}' for softmax", b.metric));
    softmax_provider_options ko;
    ko.backend = f->backend;
    ko.chunk = f->chunk;
    ko.faults = f->inject;
    ko.exp2 = f->exp2;
    ko.exec_timeout_s = f->exec_timeout;
    ko.exec_worker = f->exec_worker;
    ko.keep_temp = f->keep;
    for (const auto& s : f->states) {
      const auto eq = s.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
        throw_input_error("--state", fmt::format("'{}' is not NAME=DTYPE", s));
      ko.states[s.substr(0, eq)] = s.substr(eq + 1);
    }
    auto kernel = make_softmax_provider(ko);
    probes::softmax_probe_options po;
    po.topk = f->topk;
    po.end_to_end = !f->no_e2e;

    result::check_result rc;
    rc.backend = kernel->name();
    nlohmann::json doc = nlohmann::json::object();
    bool breach = false;
    if (!sweep) {
      const auto p = probes::run_softmax_point(*kernel, c, po);
      breach = p.nonfinite();
      nlohmann::json gates = nlohmann::json::array();
      for (const auto& b : bounds) {
        const auto m = p.metric(b.metric);
        const bool ok = m && b.holds(*m);
        breach |= !ok;
        gates.push_back({{"bound", b.text()}, {"measured", m ? probes::json_number(*m) : nullptr}, {"pass", ok}});
        if (b.is_default) gates.back()["default"] = true;
      }
      probes::fill_result(p, bounds, rc);
      doc["result"] = probes::to_json(p);
      doc["gates"] = gates;
    } else {
      probes::softmax_sweep_options so;
      so.base = c;
      so.vocab_lo = lo;
      so.vocab_hi = hi;
      so.points = (f->points == "tile" && kernel->chunk() == 0) ? "log:8" : f->points;
      so.probe = po;
      so.bounds = bounds;
      progress_bar bar;
      so.on_point = [&bar](std::size_t done, std::size_t total, std::int64_t v) {
        bar.update(done, total, fmt::format("vocab {}", v));
      };
      const auto s = probes::run_softmax_sweep(*kernel, so);
      bar.finish();
      breach = s.gated_breach;
      probes::fill_result(s, so, rc);
      doc["base_case"] = c.id();
      doc.update(probes::to_json(s));
    }
    doc["pass"] = !breach;
    doc["backend"] = {{"name", kernel->name()}, {"metadata", kernel->metadata()}};
    rc.details = std::move(doc);  // the document's own layout ("result" for a point, the sweep's fields)
    exit_status() = breach ? 1 : 0;
    write_command_reports(f->out, "softmax", c.seed, std::move(rc), exit_status());
  });
}

}  // namespace numprobe::cli
