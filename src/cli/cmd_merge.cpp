// `numprobe merge A.json B.json ...`: join the JSON results of shards (`run --shard i/N --json`)
// into one result and write its reports. Shards of one scenario are put back in scenario order.
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
#include "src/cli/command.hpp"

namespace numprobe::cli {
namespace {

struct merge_flags {
  std::vector<std::string> inputs;
  std::string out;
  std::map<std::string, std::string> paths;
};

result::run_result read_result(const std::string& path) {
  // A run's JSON report is kilobytes to megabytes; the cap refuses a wrong path early.
  constexpr std::size_t k_max_report_bytes = std::size_t{1} << 30;
  const auto j = nlohmann::json::parse(io::read_text_file(path, k_max_report_bytes, "JSON report"),
                                       nullptr, false);
  if (j.is_discarded()) throw_input_error(path, "not JSON");
  return result::run_from_json(j, path);
}

}  // namespace

void setup_merge(CLI::App& app) {
  auto f = std::make_shared<merge_flags>();
  auto* sub = app.add_subcommand("merge", "join shard results (run --shard i/N --json) into one report");
  sub->add_option("results", f->inputs, "JSON results of `numprobe run`")->required();
  sub->add_option("--out", f->out, "write every report into DIR");
  for (const auto& rf : reports::report_formats())
    sub->add_option(fmt::format("--{}", rf.name), f->paths[std::string(rf.name)],
                    fmt::format("write {} to PATH ('-' for stdout)", rf.description));
  sub->callback([f] {
    std::vector<result::run_result> parts;
    for (const auto& p : f->inputs) parts.push_back(read_result(p));
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
