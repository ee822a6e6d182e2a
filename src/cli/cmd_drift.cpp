// `numprobe drift`: error against sequence length across tile boundaries, with a growth fit.
#include <fmt/format.h>
#include <memory>
#include <optional>

#include "numprobe/base/error.hpp"
#include "probes/attention/drift_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/mpi_session.hpp"
#include "src/cli/progress.hpp"
#include "src/core/interrupt.hpp"

namespace numprobe::cli {
namespace {

std::pair<std::int64_t, std::int64_t> parse_range(const std::string& s) {
  const auto dots = s.find("..");
  if (dots == std::string::npos) {
    const auto v = parse_positive(s, "--seq");
    return {v, v};
  }
  return {parse_positive(s.substr(0, dots), "--seq"), parse_positive(s.substr(dots + 2), "--seq")};
}

}  // namespace

void setup_drift(CLI::App& app) {
  auto flags = std::make_shared<case_flags>();
  auto points = std::make_shared<std::string>("tile");
  auto* sub = app.add_subcommand("drift", "error vs sequence length, tile-boundary aware, growth fit");
  flags->seq = "128..8192";
  add_case_flags(sub, *flags, "key lengths A..B");
  sub->add_option("--points", *points, "tile | log:N | comma list of lengths")->capture_default_str();
  add_report_flags(sub, flags->out, "write the points as CSV (full precision) to PATH");
  add_default_bound_flag(sub, flags->no_default_bound);
  auto mpi_flag = std::make_shared<bool>(false);
  sub->add_flag("--mpi", *mpi_flag,
                "under mpirun: the lengths shared among the ranks (rank r on GPU local-rank), rank 0 writes the "
                "single-process report (needs an MPI build)");
  sub->callback([flags, points, mpi_flag] {
    auto& f = *flags;
    std::optional<mpi_session> mpi;
    if (*mpi_flag) mpi.emplace();
    // --decode: --splits/--page-size lists give one length sweep per combination.
    const auto lists = take_decode_sweep_lists(f);
    const bool sweep = f.decode && (!lists.splits.empty() || !lists.page_sizes.empty());
    const auto [lo, hi] = parse_range(f.seq);
    probes::drift_options o;
    o.base = make_case(f, hi);  // validates the flags once, at the longest length
    o.seq_lo = lo;
    o.seq_hi = hi;
    o.points = *points;
    auto po = make_provider_options(f);
    if (mpi) {
      po.device = mpi->local_rank();  // one rank per GPU
      o.share = mpi->share();
    }
    o.bounds = gate_bounds(f, po);
    o.probe.sampling = make_sampling(f, 64);
    o.probe.end_to_end = !f.no_e2e;
    auto prov = make_attention_provider(po);
    progress_bar bar(!mpi || mpi->rank() == 0);
    o.on_point = [&bar](std::size_t done, std::size_t total, std::int64_t seq) {
      bar.update(done, total, fmt::format("seq {}", seq));
    };
    // SIGINT/SIGTERM stop the sweep between points; the points measured are reported (exit 130/143).
    const interrupt_scope defer;
    o.stop = [] { return interrupt_signal() != 0; };
    const auto r = sweep ? probes::run_drift_decode_sweep(po, lists.splits, lists.page_sizes, o)
                         : probes::run_drift(*prov, o);
    bar.finish();
    result::check_result c;
    const int status = probes::fill_command_result(r, o, *prov, c);
    if (r.incomplete)
      c.message = fmt::format("{} of {} lengths measured", r.points.size(), r.lengths_planned);
    const int code = r.incomplete ? 128 + interrupt_signal() : status;
    auto report = [&] {
      write_command_reports(f.out, "drift", o.base.seed, std::move(c), status, r.incomplete ? interrupt_signal() : 0);
      return code;
    };
    // Every rank holds the whole result; rank 0 writes it.
    exit_status() = mpi ? mpi->finish(report) : report();
  });
}

}  // namespace numprobe::cli
