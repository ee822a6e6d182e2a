// `numprobe merge A.json B.json ...`: join the JSON results of shards (`run --shard i/N --json`)
// into one result and write its reports. Shards of one scenario are put back in scenario order;
// shards of one scan (`scan --shard i/N --json`) into the unsharded scan's document.
#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "reports/report_files.hpp"
#include "numprobe/io/regular_file.hpp"
#include "reports/report_writer.hpp"
#include "probes/scan/scan_probe.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"

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
  if (j.is_discarded() || !j.is_object()) throw_input_error(path, "not a JSON document");
  return j;
}

bool is_scan_document(const nlohmann::json& j) {
  return j.value("command_document", false) && j.value("command", "") == "scan";
}

// `scan --shard i/N --json` documents: one scan document, the unsharded scan's report.
void merge_scan(const merge_flags& f, const std::vector<nlohmann::json>& docs) {
  if (!f.out.empty()) throw_input_error("--out", "scan shards merge into --json/--md/... PATH, not --out DIR");
  std::vector<probes::scan_report> parts;
  bool allow_nonfinite = false;
  for (std::size_t k = 0; k < docs.size(); ++k) {
    if (!is_scan_document(docs[k]))
      throw_input_error(f.inputs[k], "is not a scan document; scan shards merge only with scan shards");
    if (!docs[k].contains("shard"))
      throw_input_error(f.inputs[k], "is a whole scan, not a shard (scan --shard i/N --json)");
    parts.push_back(probes::scan_from_json(docs[k], f.inputs[k]));
    const bool allow = docs[k]["shard"].value("allow_nonfinite", false);
    if (k > 0 && allow != allow_nonfinite)
      throw_input_error(f.inputs[k], "differs from " + f.inputs.front() + " in --allow-nonfinite");
    allow_nonfinite = allow;
  }
  const auto m = probes::merge_scan_shards(parts, f.inputs);
  std::int64_t nonfinite = 0;
  for (const auto& t : m.tensors) nonfinite += t.results.front().nonfinite_inputs > 0 ? 1 : 0;
  const int code = nonfinite > 0 && !allow_nonfinite ? 1 : 0;
  result::check_result c;
  probes::fill_result(m, m.options, {}, allow_nonfinite, c);
  report_flags out;
  out.paths = f.paths;
  write_command_reports(out, "scan", 0, std::move(c), code);
  exit_status() = code;
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
    result::run_result m;
    m.envelope = parts.front().envelope;
    m.scenario = parts.front().scenario;
    int count = 0;
    std::set<int> seen;
    bool sharded = true;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const auto& p = parts[k];
      if (p.scenario != m.scenario)
        throw_input_error(f->inputs[k], fmt::format("scenario '{}' differs from '{}' in {}", p.scenario, m.scenario,
                                                    f->inputs.front()));
      const auto slash = p.shard.find('/');
      if (slash == std::string::npos) {
        sharded = false;
        continue;
      }
      const int i = std::stoi(p.shard.substr(0, slash)), n = std::stoi(p.shard.substr(slash + 1));
      if (count && n != count) throw_input_error(f->inputs[k], fmt::format("shard {} is not of {} shards", p.shard, count));
      count = n;
      if (!seen.insert(i).second) throw_input_error(f->inputs[k], fmt::format("shard {} given twice", p.shard));
    }
    std::set<std::string> names;
    auto add = [&](const result::check_result& c, const std::string& from) {
      if (!names.insert(c.name).second) throw_input_error(from, fmt::format("check '{}' appears in two results", c.name));
      m.checks.push_back(c);
    };
    if (sharded && count > 0) {
      // Shard i ran the selected checks i, i+N, i+2N, ...: interleave them back.
      std::map<int, std::size_t> by_index;
      for (std::size_t k = 0; k < parts.size(); ++k) by_index[std::stoi(parts[k].shard)] = k;
      for (std::size_t round = 0;; ++round) {
        bool any = false;
        for (const auto& [i, k] : by_index)
          if (round < parts[k].checks.size()) {
            add(parts[k].checks[round], f->inputs[k]);
            any = true;
          }
        if (!any) break;
      }
    } else {
      for (std::size_t k = 0; k < parts.size(); ++k)
        for (const auto& c : parts[k].checks) add(c, f->inputs[k]);
    }
    for (const auto& p : parts) {
      m.incomplete |= p.incomplete;
      m.checks_planned += p.checks_planned;
      m.checks_resumed += p.checks_resumed;
      m.seconds += p.seconds;
    }
    if (sharded && count > 0 && static_cast<int>(seen.size()) != count) {
      m.incomplete = true;
      std::string missing;
      for (int i = 0; i < count; ++i)
        if (!seen.count(i)) missing += (missing.empty() ? "" : ", ") + fmt::format("{}/{}", i, count);
      fmt::print(stderr, "numprobe: warning: missing shards {}; the merged result is marked incomplete\n", missing);
    }
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
