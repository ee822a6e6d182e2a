// `numprobe bisect`: localize an accuracy failure by length, classify it with targeted input
// families, and name the state held in the wrong precision (emu). Prints a re-runnable trace.
#include <fmt/format.h>
#include <algorithm>
#include <memory>

#include "numprobe/core/error.hpp"
#include "probes/bisect.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/progress.hpp"
#include "src/cli/table.hpp"

namespace numprobe::cli {
namespace {

std::pair<std::int64_t, std::int64_t> parse_seq_range(const std::string& s) {
  const auto dots = s.find("..");
  // `--seq N` means up to N: from the default start (64), or from N itself when N is shorter.
  if (dots == std::string::npos) {
    const auto hi = parse_positive(s, "--seq");
    return {std::min<std::int64_t>(64, hi), hi};
  }
  const auto lo = parse_positive(s.substr(0, dots), "--seq");
  const auto hi = parse_positive(s.substr(dots + 2), "--seq");
  if (hi < lo) throw_input_error("--seq", fmt::format("need A <= B, got {}", s));
  return {lo, hi};
}

void print_bisect(const probes::bisect_result& r) {
  fmt::print("backend   {}\ncase      {}\nbound     {}\n\n", r.provider, r.base_case,
             r.bounds.empty() ? "" : r.bounds.front());
  text_table t({"#", "stage", "seq", "ratio", "rel_rms", "nan", "result", "change", "decision"});
  for (const auto& s : r.trace)
    t.add({std::to_string(s.index), s.stage, std::to_string(s.seq), fixed3(s.ratio_to_naive), sci(s.rel_rms),
           std::to_string(s.nan_count), s.failed ? "FAIL" : "pass", s.change, s.decision});
  t.print();
  fmt::print("\n");
  if (!r.failure_found) {
    fmt::print("result    every length tried holds the bound\n");
    if (r.family_sweep_ran) {
      fmt::print("family sweep (every class's probe against its control):\n");
      for (const auto& c : r.family_sweep) {
        fmt::print("  {:<6} {}\n", c.verdict == "fail" ? "[FAIL]" : c.verdict == "pass" ? "[pass]" : "[n/a]", c.name);
        if (c.verdict == "fail")
          for (const auto& e : c.evidence) fmt::print("           + {}\n", e);
      }
      fmt::print("classification     {}\n", r.classification);
    }
  } else {
    const auto& L = r.length;
    fmt::print("first failing seq  {}{}\n", L.first_failing,
               L.fails_at_lowest ? " (fails at the shortest length tried)"
                                 : fmt::format(" (passes at {})", L.last_passing));
    fmt::print("tile aligned       {} (B={} from {}, pattern {})\n", L.tile_aligned ? "yes" : "no", L.tile,
               L.tile_source, L.tile_pattern);
    if (r.inferred_tile.ran) fmt::print("inferred tile      {}\n", probes::tile_text(r.inferred_tile));
    for (const auto& c : r.classes) {
      if (c.verdict == "not tested") continue;
      fmt::print("{:<8} {}\n", c.verdict == "supported" ? "[yes]" : "[no]", c.name);
      for (const auto& e : c.evidence_for) fmt::print("           + {}\n", e);
      for (const auto& e : c.evidence_against) fmt::print("           - {}\n", e);
    }
    if (!r.precision.curve_lengths.empty()) {
      fmt::print("\nerror vs length before / after upgrading {{");
      for (std::size_t i = 0; i < r.precision.culprit.size(); ++i)
        fmt::print("{}{}", i ? "," : "", r.precision.culprit[i]);
      fmt::print("}} to f64 ({}):\n", r.precision.family_case);
      for (std::size_t i = 0; i < r.precision.curve_lengths.size(); ++i)
        fmt::print("  S={:<7} {} -> {}\n", r.precision.curve_lengths[i], sci(r.precision.curve_before[i]),
                   sci(r.precision.curve_after[i]));
    }
    if (r.fp8.ran) {
      fmt::print("\nfp8 quantization points at S={} (as configured: {}):\n", r.fp8.seq,
                 r.fp8.before.nan ? fmt::format("NaN/Inf x{}", r.fp8.before.nan) : sci(r.fp8.before.rel_rms));
      for (const auto& e : r.fp8.restorations) {
        std::string pts;
        for (const auto& p : e.points) pts += (pts.empty() ? "" : "+") + p;
        fmt::print("  {:<10} restored: rel_rms {} {}\n", pts, sci(e.outcome.rel_rms),
                   e.removes ? "-> failure removed" : "-> still fails");
      }
      fmt::print("  verdict {}: {}\n", r.fp8.verdict, r.fp8.text);
      if (r.fp8.rest_restored) fmt::print("  (the later stages ran with these points restored)\n");
    }
    if (r.decode.ran) {
      fmt::print("\nsplit-KV decode at S={}:\n", r.decode.seq);
      auto line = [](const char* what, const std::vector<probes::decode_sweep_point>& v) {
        fmt::print("  {:<10}", what);
        for (const auto& p : v)
          fmt::print(" {}:{}", p.value, p.outcome.nan ? "NaN" : p.outcome.failed ? "FAIL" : "pass");
        fmt::print("\n");
      };
      line("splits", r.decode.split_sweep);
      line("page size", r.decode.page_sweep);
      line("length", r.decode.page_edges);
      fmt::print("  {}\n", r.decode.text);
    }
    std::string cands;
    for (const auto& c : r.candidates) cands += (cands.empty() ? "" : "; ") + c;
    fmt::print("\nclassification     {}{}\n", r.classification,
               r.candidates.size() > 1 ? " (" + cands + ")" : "");
    fmt::print("culprit            {}\n", probes::culprit_text(r));
  }
  fmt::print("time      {:.1f} s, {} steps, {:.2f} s per step\n", r.seconds, r.trace.size(),
             r.trace.empty() ? 0.0 : r.seconds / static_cast<double>(r.trace.size()));
}

}  // namespace

void setup_bisect(CLI::App& app) {
  auto flags = std::make_shared<case_flags>();
  auto* sub = app.add_subcommand("bisect", "localize a failure: by length, input family, state precision");
  flags->seq = "64..16384";
  add_case_flags(sub, *flags, "key lengths A..B to bisect, or N: up to N");
  add_report_flags(sub, flags->out);
  sub->callback([flags] {
    const auto& f = *flags;
    const auto [lo, hi] = parse_seq_range(f.seq);
    probes::bisect_options o;
    o.base = make_case(f, hi);
    o.seq_lo = lo;
    o.seq_hi = hi;
    o.provider = make_provider_options(f);
    o.bounds = make_bounds(f);
    // Sampled rows keep each step O(rows x S x D); bisect judges the kernel-induced error only.
    o.probe.sampling = make_sampling(f, 32);
    o.probe.end_to_end = false;
    o.probe.worst = 0;
    progress_bar bar;
    o.on_step = [&bar](const probes::bisect_step& s) {
      bar.update(static_cast<std::size_t>(s.index), static_cast<std::size_t>(s.index) + 1,
                 fmt::format("{} seq {}", s.stage, s.seq));
    };
    const auto r = probes::run_bisect(o);
    bar.finish();
    if (!f.out.to_stdout()) print_bisect(r);
    // A failure at some length, or (on a case that passes) a class the family sweep finds.
    exit_status() = r.failure_found || !r.candidates.empty() ? 1 : 0;
    result::check_result c;
    probes::fill_result(r, o, c);
    write_command_reports(f.out, "bisect", o.base.seed, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
