// `numprobe audit`: every bug class's cheapest discriminating probe against one kernel, with a
// verdict per class (pass | fail | not-applicable) and the evidence: case ids, measured against
// the bound, and the contrasting case.
#include <fmt/format.h>
#include <memory>
#include <optional>

#include "numprobe/base/error.hpp"
#include "probes/audit/audit.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/mpi_session.hpp"
#include "src/cli/progress.hpp"
#include "src/core/interrupt.hpp"

namespace numprobe::cli {
namespace {

// `--seq N` is the longest length of the length-driven probes; `A..B` takes B.
std::int64_t parse_seq_max(const std::string& s) {
  const auto dots = s.find("..");
  if (dots == std::string::npos) return parse_positive(s, "--seq");
  const auto lo = parse_positive(s.substr(0, dots), "--seq");
  const auto hi = parse_positive(s.substr(dots + 2), "--seq");
  if (hi < lo) throw_input_error("--seq", fmt::format("need A <= B, got {}", s));
  return hi;
}

}  // namespace

void setup_audit(CLI::App& app) {
  auto flags = std::make_shared<case_flags>();
  auto quick = std::make_shared<bool>(false);
  auto verbose = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("audit", "every bug class's cheapest probe against one kernel, a verdict per class");
  flags->seq = "8192";
  add_case_flags(sub, *flags, "longest length of the length-driven probes (N, or A..B for up to B)");
  add_report_flags(sub, flags->out);
  sub->add_flag("--quick", *quick, "fewer lengths per class (a smaller, faster run)");
  sub->add_flag("--trace", *verbose, "print every measured case");
  auto mpi_flag = std::make_shared<bool>(false);
  sub->add_flag("--mpi", *mpi_flag,
                "under mpirun: the classes shared among the ranks (rank r on GPU local-rank), rank 0 writes the "
                "single-process report (needs an MPI build)");
  sub->callback([flags, quick, verbose, mpi_flag] {
    const auto& f = *flags;
    std::optional<mpi_session> mpi;
    if (*mpi_flag) mpi.emplace();
    const std::int64_t hi = parse_seq_max(f.seq);
    if (f.queries != 0 && !f.decode)
      throw_input_error("--queries", "audit sets each probe's query rows (T = S, T < S, T > S); only --decode takes "
                                     "--queries (1..8 new queries)");
    probes::audit_options o;
    o.base = make_case(f, std::min<std::int64_t>(hi, 1024));
    o.seq_hi = hi;
    o.quick = *quick;
    o.provider = make_provider_options(f);
    if (mpi) {
      o.provider.device = mpi->local_rank();  // one rank per GPU
      o.share = mpi->share();
    }
    o.bounds = make_bounds(f);
    o.probe.sampling = make_sampling(f, 32);
    o.probe.end_to_end = false;
    o.probe.worst = 0;
    progress_bar bar(!mpi || mpi->rank() == 0);
    o.on_step = [&bar](const probes::bisect_step& s) {
      bar.update(static_cast<std::size_t>(s.index), static_cast<std::size_t>(s.index) + 1,
                 fmt::format("seq {}", s.seq));
    };
    // SIGINT/SIGTERM: the cases left are recorded as not run, and the classes judged so far are
    // reported (exit 130/143).
    const interrupt_scope defer;
    o.stop = [] { return interrupt_signal() != 0; };
    const auto r = probes::run_audit(o);
    bar.finish();
    const int signal = interrupt_signal();
    const int code = signal ? 128 + signal : probes::audit_exit_code(r);
    auto report = [&] {
      result::check_result c;
      probes::fill_result(r, c);
      auto out = f.out;
      out.terminal_traces = *verbose;
      write_command_reports(out, "audit", o.base.seed, std::move(c), signal ? 3 : code, signal);
      return code;
    };
    // Every rank holds the whole result; rank 0 writes it.
    exit_status() = mpi ? mpi->finish(report) : report();
  });
}

}  // namespace numprobe::cli
