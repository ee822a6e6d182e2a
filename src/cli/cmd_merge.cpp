// `numprobe merge A.json B.json ...`: join the JSON results of shards (`run --shard i/N --json`)
// into one result and write its reports. Shards of one scenario are put back in scenario order;
// shards of one scan (`scan --shard i/N --json`) into the unsharded scan's document.
#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <memory>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "reports/report_files.hpp"
#include "numprobe/io/regular_file.hpp"
#include "reports/report_writer.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"
#include "src/cli/shard_merge.hpp"

namespace numprobe::cli {
namespace {

struct merge_flags {
  std::vector<std::string> inputs;
  std::string out;
  std::map<std::string, std::string> paths;
};

nlohmann::json read_document(const std::string& path) {
  // A run's JSON report is kilobytes to megabytes; the cap refuses a wrong path early.
  constexpr std::size_t k_max_report_bytes = std::size_t{1} << 30;
  auto j = nlohmann::json::parse(io::read_text_file(path, k_max_report_bytes, "JSON report"), nullptr, false);
  if (j.is_discarded()) throw_input_error(path, "not JSON");
  if (!j.is_object()) throw_input_error(path, "not a numprobe run result (a JSON object is expected)");
  return j;
}

// `scan --shard i/N --json` documents: one scan document, the unsharded scan's report.
void merge_scan(const merge_flags& f, const std::vector<nlohmann::json>& docs) {
  if (!f.out.empty()) throw_input_error("--out", "scan shards merge into --json/--md/... PATH, not --out DIR");
  auto m = merge_scan_documents(docs, f.inputs);
  report_flags out;
  out.paths = f.paths;
  write_command_reports(out, "scan", 0, std::move(m.check), m.exit_code);
  exit_status() = m.exit_code;
}

}  // namespace

void setup_merge(CLI::App& app) {
  auto f = std::make_shared<merge_flags>();
  auto* sub = app.add_subcommand(
      "merge", "join shard results (run --shard i/N --json, scan --shard i/N --json) into one report");
  sub->add_option("results", f->inputs, "JSON results of `numprobe run`, or of `numprobe scan --shard`")->required();
  sub->add_option("--out", f->out, "write every report into DIR");
  for (const auto& rf : reports::report_formats())
    sub->add_option(fmt::format("--{}", rf.name), f->paths[std::string(rf.name)],
                    fmt::format("write {} to PATH ('-' for stdout)", rf.description));
  sub->callback([f] {
    std::vector<nlohmann::json> docs;
    for (const auto& p : f->inputs) docs.push_back(read_document(p));
    if (std::any_of(docs.begin(), docs.end(), is_scan_document)) {
      merge_scan(*f, docs);
      return;
    }
    std::vector<result::run_result> parts;
    for (std::size_t k = 0; k < docs.size(); ++k) parts.push_back(result::run_from_json(docs[k], f->inputs[k]));
    auto m = merge_run_documents(parts, f->inputs);
    m.envelope["command"] = "merge";
    reports::report_targets t;
    t.out_dir = f->out;
    t.paths = f->paths;
    reports::write_reports(m, t);
    const bool to_stdout = std::any_of(f->paths.begin(), f->paths.end(), [](const auto& p) { return p.second == "-"; });
    if (!to_stdout) reports::terminal_writer(::isatty(STDOUT_FILENO) != 0).print(m);
    exit_status() = m.exit_code();
  });
}

}  // namespace numprobe::cli
