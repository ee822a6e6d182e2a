#include "src/cli/shard_merge.hpp"

#include <fmt/format.h>
#include <map>
#include <set>

#include "numprobe/base/error.hpp"
#include "probes/scan/scan_probe.hpp"

namespace numprobe::cli {

result::run_result merge_run_documents(const std::vector<result::run_result>& parts,
                                       const std::vector<std::string>& places) {
  result::run_result m;
  m.envelope = parts.front().envelope;
  m.scenario = parts.front().scenario;
  int count = 0;
  std::set<int> seen;
  bool sharded = true;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const auto& p = parts[k];
    if (p.scenario != m.scenario)
      throw_input_error(places[k], fmt::format("scenario '{}' differs from '{}' in {}", p.scenario, m.scenario,
                                               places.front()));
    const auto slash = p.shard.find('/');
    if (slash == std::string::npos) {
      sharded = false;
      continue;
    }
    const int i = std::stoi(p.shard.substr(0, slash)), n = std::stoi(p.shard.substr(slash + 1));
    if (count && n != count) throw_input_error(places[k], fmt::format("shard {} is not of {} shards", p.shard, count));
    count = n;
    if (!seen.insert(i).second) throw_input_error(places[k], fmt::format("shard {} given twice", p.shard));
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
          add(parts[k].checks[round], places[k]);
          any = true;
        }
      if (!any) break;
    }
  } else {
    for (std::size_t k = 0; k < parts.size(); ++k)
      for (const auto& c : parts[k].checks) add(c, places[k]);
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
  return m;
}

bool is_scan_document(const nlohmann::json& j) {
  return j.value("command_document", false) && j.value("command", "") == "scan";
}

merged_scan merge_scan_documents(const std::vector<nlohmann::json>& docs, const std::vector<std::string>& places) {
  std::vector<probes::scan_report> parts;
  bool allow_nonfinite = false;
  for (std::size_t k = 0; k < docs.size(); ++k) {
    if (!is_scan_document(docs[k]))
      throw_input_error(places[k], "is not a scan document; scan shards merge only with scan shards");
    if (!docs[k].contains("shard"))
      throw_input_error(places[k], "is a whole scan, not a shard (scan --shard i/N --json)");
    parts.push_back(probes::scan_from_json(docs[k], places[k]));
    const bool allow = docs[k]["shard"].value("allow_nonfinite", false);
    if (k > 0 && allow != allow_nonfinite)
      throw_input_error(places[k], "differs from " + places.front() + " in --allow-nonfinite");
    allow_nonfinite = allow;
  }
  const auto m = probes::merge_scan_shards(parts, places);
  std::int64_t nonfinite = 0;
  for (const auto& t : m.tensors) nonfinite += t.results.front().nonfinite_inputs > 0 ? 1 : 0;
  merged_scan out;
  out.exit_code = nonfinite > 0 && !allow_nonfinite ? 1 : 0;
  probes::fill_result(m, m.options, {}, allow_nonfinite, out.check);
  return out;
}

}  // namespace numprobe::cli
