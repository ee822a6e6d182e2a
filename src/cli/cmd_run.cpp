// `numprobe run [SCENARIO.toml]`: run a scenario's checks with their gates and write reports.
// No argument runs the built-in default scenario. Exit code: the worst outcome (3 > 2 > 1 > 0);
// 130 when interrupted (the partial reports are written, marked incomplete).
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "reports/report_files.hpp"
#include "reports/report_writer.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/mpi_session.hpp"
#include "src/cli/progress.hpp"
#include "src/cli/shard_merge.hpp"
#include "src/core/interrupt.hpp"
#include "src/providers/provider.hpp"
#include "src/scenario/check_runner.hpp"
#include "src/scenario/run_scenario.hpp"

namespace numprobe::cli {
namespace {

struct run_flags {
  std::string scenario;
  std::string backend;
  std::string filter;
  std::string shard;
  std::string out;
  bool resume = false;
  bool list = false;
  bool mpi = false;  // --mpi: the ranks are the shards, rank 0 writes the merged report
  std::map<std::string, std::string> paths;  // format -> PATH
};

nlohmann::json devices() {
  nlohmann::json d = nlohmann::json::array();
  for (const auto& b : attention_backends()) d.push_back({{"backend", b.name}, {"description", b.description}});
  return d;
}

// --backend is checked up front, even when no selected check takes a backend: a misspelt name
// must not pass silently.
void check_backend_name(const std::string& backend) {
  if (backend.empty()) return;
  const std::string key = backend.substr(0, backend.find(':'));
  for (const char* k : {"best", "ref", "emu", "cuda", "hip", "exec", "exec-worker", "plugin"})
    if (key == k) return;
  std::string known = "best";
  for (const auto& b : attention_backends()) {
    if (b.name == key) return;
    known += "|" + b.name;
  }
  throw_input_error("--backend", fmt::format("unknown backend '{}' (available: {})", backend, known));
}

void list_checks(const scenario::scenario& sc, const scenario::run_options& o) {
  for (const auto* c : scenario::select_checks(sc, o)) {
    std::string bounds;
    for (const auto& b : c->bounds) bounds += (bounds.empty() ? "" : ", ") + b.text();
    fmt::print("{:<10} {}  {}\n", c->probe, c->name, bounds);
  }
}

}  // namespace

void setup_run(CLI::App& app) {
  auto f = std::make_shared<run_flags>();
  auto* sub = app.add_subcommand("run", "run checks with gates; no argument runs the built-in default");
  sub->add_option("scenario", f->scenario, "scenario TOML (default: the built-in default scenario)");
  sub->add_option("--backend", f->backend, "override every check's backend: ref|emu|cuda|hip|best");
  sub->add_option("--filter", f->filter, "run only checks whose name matches REGEX");
  sub->add_option("--shard", f->shard, "run share i of N (0 <= i < N), e.g. 0/4");
  sub->add_option("--out", f->out, "write every report and the journal into DIR");
  sub->add_flag("--resume", f->resume, "continue an interrupted run from DIR/journal.jsonl (needs --out)");
  sub->add_flag("--list", f->list, "list the selected checks and exit");
  sub->add_flag("--mpi", f->mpi,
                "under mpirun: rank r of n runs shard r/n on GPU local-rank, rank 0 writes the report (needs an MPI build)");
  for (const auto& rf : reports::report_formats())
    sub->add_option(fmt::format("--{}", rf.name), f->paths[std::string(rf.name)],
                    fmt::format("write {} to PATH ('-' for stdout)", rf.description));
  sub->callback([f] {
    const bool builtin = f->scenario.empty();
    const auto sc = builtin ? scenario::parse_scenario(scenario::default_scenario_text(), "built-in default.toml")
                            : scenario::load_scenario_file(f->scenario);
    scenario::run_options o;
    check_backend_name(f->backend);
    o.backend_override = f->backend;
    o.filter = f->filter;
    if (!f->shard.empty()) o.shard = scenario::parse_shard(f->shard);
    if (f->resume && f->out.empty()) throw_input_error("--resume", "needs --out DIR (the journal lives there)");
    if (f->mpi && !f->shard.empty()) throw_input_error("--mpi", "the ranks are the shards: give --mpi or --shard");
    if (f->mpi && f->resume) throw_input_error("--mpi", "does not resume (each rank would need its own journal)");
    std::optional<mpi_session> mpi;
    if (f->mpi) mpi.emplace();
    const bool ranks = mpi && mpi->size() > 1;
    if (ranks) o.shard = {mpi->rank(), mpi->size()};
    if (mpi) o.device_override = mpi->local_rank();  // one rank per GPU
    {  // report paths before the run: a clash found after the checks would cost them
      reports::report_targets t;
      t.out_dir = f->out;
      t.paths = f->paths;
      reports::check_report_targets(t);
    }
    if (f->list) {
      list_checks(sc, o);
      return;
    }
    if (!f->out.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(f->out, ec);
      if (ec) throw_input_error(f->out, "cannot create the output folder: " + ec.message());
      if (!ranks) o.journal = (std::filesystem::path(f->out) / "journal.jsonl").string();
    }
    o.resume = f->resume;
    const bool to_stdout = std::any_of(f->paths.begin(), f->paths.end(), [](const auto& p) { return p.second == "-"; });
    progress_bar bar;
    o.on_start = [&bar](const scenario::check_spec& c, std::size_t i, std::size_t n) { bar.update(i, n, c.name); };

    scenario::interrupt_requested().store(false);
    // Ctrl-C/SIGTERM set the flag and wake any child wait (src/core/interrupt.hpp); a second
    // one ends the process at once.
    const auto run_share = [&] {
      const interrupt_scope defer;
      return scenario::run_scenario(sc, o);
    };
    // The reports of the run (a rank's merge, or the one process's run); its exit code.
    const auto report = [&](result::run_result rr) {
      bar.finish();
      // The reports carry the process's exit code: 128 + the signal when interrupted.
      if (rr.incomplete && scenario::interrupt_requested().load())
        rr.signal = interrupt_signal() > 0 ? interrupt_signal() : SIGINT;
      std::uint64_t seed = 7;
      if (!sc.checks.empty()) seed = static_cast<std::uint64_t>(sc.checks.front().get_int("seed", 7));
      rr.envelope = json_envelope("run", seed);
      rr.envelope["devices"] = devices();
      nlohmann::json seeds = nlohmann::json::object();
      for (const auto& c : sc.checks) seeds[c.name] = c.get_int("seed", 7);
      rr.envelope["seeds"] = {{"inputs", seed}, {"per_check", seeds}};
      rr.envelope["command"] = "run";
      reports::report_targets t;
      t.out_dir = f->out;
      t.paths = f->paths;
      reports::write_reports(rr, t);
      if (!to_stdout) {
        const char* no_colour = std::getenv("NO_COLOR");
        reports::terminal_writer(::isatty(STDOUT_FILENO) != 0 && !(no_colour && *no_colour)).print(rr);
      }
      if (!f->out.empty() && !to_stdout) fmt::print("reports in {}\n", f->out);
      return rr.exit_code();
    };
    if (!ranks) {
      exit_status() = report(run_share());
      return;
    }
    // Each rank its share of the checks (as --shard r/n) on GPU local-rank; rank 0 puts them back
    // in scenario order, as `numprobe merge` does. A check that errors names its rank.
    const auto docs = mpi->run_and_gather([&] {
      auto part = run_share();
      part.envelope = json_envelope("run", 0);  // a document as a file holds it (rank 0 writes the real one)
      for (auto& c : part.checks)
        if (c.outcome == result::status::m_error) c.message = fmt::format("rank {}: {}", mpi->rank(), c.message);
      return result::to_json(part).dump();
    });
    bar.finish();
    exit_status() = mpi->finish([&] {
      std::vector<result::run_result> parts;
      std::vector<std::string> places;
      for (std::size_t k = 0; k < docs.size(); ++k) {
        places.push_back(fmt::format("rank {}", k));
        parts.push_back(result::run_from_json(nlohmann::json::parse(docs[k]), places.back()));
      }
      return report(merge_run_documents(parts, places));
    });
  });
}

}  // namespace numprobe::cli
