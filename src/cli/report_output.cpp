#include "src/cli/report_output.hpp"

#include <csignal>
#include <cstdio>
#include <fmt/format.h>

#include "reports/report_files.hpp"
#include "reports/report_writer.hpp"
#include "src/cli/case_options.hpp"

namespace numprobe::cli {

bool report_flags::any() const {
  for (const auto& [name, path] : paths)
    if (!path.empty()) return true;
  return false;
}

bool report_flags::to_stdout() const {
  for (const auto& [name, path] : paths)
    if (path == "-") return true;
  return false;
}

void add_report_flags(CLI::App* sub, report_flags& f, std::string_view csv_help) {
  for (const auto& rf : reports::report_formats()) {
    const std::string help = rf.name == "csv" && !csv_help.empty()
                                 ? std::string(csv_help)
                                 : fmt::format("write {} to PATH ('-' for stdout)", rf.description);
    sub->add_option(fmt::format("--{}", rf.name), f.paths[std::string(rf.name)], help);
  }
  // Report paths are checked when the flags are parsed, before any work: a clash or a missing
  // folder found after a long sweep would cost the sweep.
  sub->parse_complete_callback([&f] {
    reports::report_targets t;
    t.paths = f.paths;
    reports::check_report_targets(t);
  });
}

void write_command_reports(const report_flags& f, const std::string& command, std::uint64_t seed,
                           result::check_result c, int exit_code, int signal) {
  if (c.name.empty()) c.name = command;
  if (c.probe.empty()) c.probe = command;
  c.outcome = exit_code == 0 ? result::status::m_pass : exit_code == 1 ? result::status::m_fail
                                                                         : result::status::m_error;
  c.error_code = exit_code >= 2 ? exit_code : 0;
  result::run_result r;
  r.envelope = json_envelope(command, seed);
  r.scenario = "numprobe " + command;
  r.command_document = true;
  r.checks_planned = 1;
  r.seconds = c.seconds;
  if (signal > 0) {
    std::fprintf(stderr, "numprobe: interrupted by %s; the reports hold what was measured before\n",
                 signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal");
    r.signal = signal;
    r.incomplete = true;
    c.outcome = result::status::m_error;
    c.error_code = 128 + signal;
    c.message = fmt::format("INCOMPLETE: interrupted by signal {}; the report holds what was measured before{}",
                            signal, c.message.empty() ? "" : " (" + c.message + ")");
  }
  r.checks.push_back(std::move(c));
  // The terminal is one more writer; it stays quiet when a report goes to stdout, so that
  // stream stays parseable.
  if (!f.to_stdout()) reports::terminal_writer(false, f.terminal_traces).print(r);
  if (!f.any()) return;
  reports::report_targets t;
  t.paths = f.paths;
  reports::write_reports(r, t);
}

}  // namespace numprobe::cli
