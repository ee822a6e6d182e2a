#pragma once
// Every command's reports: --json, --junit, --md, --csv and --html PATH ('-' for stdout), alone
// or together. Each command turns its probe's findings into one result::check_result and hands
// it here; the writers in reports/ render it (docs/json-schema.md for the JSON layout).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "numprobe/core/result.hpp"

namespace numprobe::cli {

struct report_flags {
  std::map<std::string, std::string> paths;  // format name (json, junit, md, csv, html) -> PATH
  bool terminal_traces = true;  // the terminal report prints the check's traces

  [[nodiscard]] bool any() const;
  // A report goes to stdout: the terminal report is left out so the stream stays parseable.
  [[nodiscard]] bool to_stdout() const;
};

// Adds one option per report format (`--csv` help text can be specialised by the command).
void add_report_flags(CLI::App* sub, report_flags& f, std::string_view csv_help = "");

// Prints the terminal report (unless a report goes to stdout) and writes the reports asked for. `c` is the command's one check: its details become the JSON
// document's top level. `exit_code` (0..3) sets the check's status, so every writer agrees with
// the process's exit status. Throws numprobe::error (exit 2) naming a path that cannot be written.
// `signal` > 0: the command was interrupted (SIGINT/SIGTERM); the reports hold what it measured
// before, say so (`incomplete`, `signal`) and carry the exit code 128 + signal.
void write_command_reports(const report_flags& f, const std::string& command, std::uint64_t seed,
                           result::check_result c, int exit_code, int signal = 0);

}  // namespace numprobe::cli
