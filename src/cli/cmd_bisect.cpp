// `numprobe bisect`: localize an accuracy failure by length, classify it with targeted input
// families, and name the state held in the wrong precision (emu). Prints a re-runnable trace.
#include <fmt/format.h>
#include <algorithm>
#include <memory>

#include "numprobe/base/error.hpp"
#include "probes/bisect/bisect.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/progress.hpp"

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
    // A failure at some length, or (on a case that passes) a class the family sweep finds.
    exit_status() = r.failure_found || !r.candidates.empty() ? 1 : 0;
    result::check_result c;
    probes::fill_result(r, o, c);
    write_command_reports(f.out, "bisect", o.base.seed, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
