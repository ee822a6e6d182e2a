#include "src/scenario/run_scenario.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <charconv>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <new>
#include <regex>

#include "numprobe/base/error.hpp"
#include "src/core/interrupt.hpp"
#include "numprobe/io/regular_file.hpp"
#include <filesystem>
#include <sstream>
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

using clock_type = std::chrono::steady_clock;

// The journal: one JSON document per line. The first line names the scenario fingerprint and
// shard; each further line is one finished check. A line cut short by a kill does not parse and
// is ignored, so a journal is always readable.
struct journal {
  std::ofstream out;

  void append(const nlohmann::json& j) {
    if (!out) return;
    out << j.dump() << '\n';
    out.flush();
  }
};

nlohmann::json journal_header(const scenario& sc, const run_options& o) {
  return {{"numprobe_journal", 1}, {"fingerprint", sc.fingerprint()}, {"shard", o.shard.text()},
          {"backend", o.backend_override}};
}

std::map<std::string, result::check_result> read_journal(const std::string& path, const nlohmann::json& header) {
  std::map<std::string, result::check_result> done;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return done;  // nothing to resume
  // One line per check: even a sweep of 10^5 checks is far below this.
  constexpr std::size_t k_max_journal_bytes = std::size_t{1} << 30;
  const std::string text = io::read_text_file(path, k_max_journal_bytes, "journal");
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return done;
  const auto h = nlohmann::json::parse(line, nullptr, false);
  if (h.is_discarded() || !h.is_object() || !h.contains("numprobe_journal"))
    throw_input_error(path, "--resume: not a numprobe journal (its first line is not a journal "
                            "header: the file is garbage or unreadable); delete it or run without --resume");
  if (h != header)
    throw_input_error(path, "--resume: this journal belongs to a different scenario, shard or "
                            "--backend; run without --resume to start over");
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;  // a partly written last line
    try {
      auto c = result::check_from_json(j, path);
      if (c.outcome != result::status::m_error) done[c.name] = std::move(c);  // errors are retried
    } catch (const error&) {
    }
  }
  return done;
}

}  // namespace

shard_spec parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  shard_spec s;
  auto num = [&](std::string_view v, int& out) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && p == v.data() + v.size();
  };
  if (slash == std::string::npos || !num(std::string_view(text).substr(0, slash), s.index) ||
      !num(std::string_view(text).substr(slash + 1), s.count) || s.count < 1 || s.index < 0 ||
      s.index >= s.count)
    throw_input_error("--shard", fmt::format("'{}' is not i/N with 0 <= i < N", text));
  return s;
}

std::atomic<bool>& interrupt_requested() { return interrupt_flag(); }

std::vector<const check_spec*> select_checks(const scenario& sc, const run_options& o) {
  std::optional<std::regex> re;
  if (!o.filter.empty()) {
    try {
      re.emplace(o.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw_input_error("--filter", fmt::format("'{}' is not a regular expression: {}", o.filter, e.what()));
    }
  }
  std::vector<const check_spec*> selected;
  for (const auto& c : sc.checks)
    if (!re || std::regex_search(c.name, *re) || std::regex_search(c.probe + ":" + c.name, *re))
      selected.push_back(&c);
  // An empty selection is a usage error, not a green run of nothing.
  if (selected.empty())
    throw_input_error("--filter", fmt::format("'{}' matches none of the scenario's {} checks", o.filter,
                                              sc.checks.size()));
  std::vector<const check_spec*> mine;
  for (std::size_t i = 0; i < selected.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(o.shard.count)) == o.shard.index) mine.push_back(selected[i]);
  return mine;
}

result::run_result run_scenario(const scenario& sc, const run_options& o) {
  const auto t0 = clock_type::now();
  result::run_result rr;
  rr.scenario = sc.title.empty() ? sc.source : sc.title + " (" + sc.source + ")";
  rr.shard = o.shard.text();
  const auto mine = select_checks(sc, o);
  rr.checks_planned = static_cast<std::int64_t>(mine.size());

  const auto header = journal_header(sc, o);
  std::map<std::string, result::check_result> done;
  if (o.resume && !o.journal.empty()) done = read_journal(o.journal, header);
  journal jr;
  if (!o.journal.empty()) {
    jr.out.open(o.journal, std::ios::trunc);
    if (!jr.out) throw_input_error(o.journal, "cannot write the journal");
    jr.append(header);
  }

  run_context ctx;
  ctx.backend_override = o.backend_override;
  ctx.device_override = o.device_override;
  ctx.interrupted = [] { return interrupt_requested().load(); };
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const auto& spec = *mine[i];
    if (const auto it = done.find(spec.name); it != done.end()) {
      rr.checks.push_back(it->second);
      ++rr.checks_resumed;
      jr.append(result::to_json(it->second));
      if (o.on_finish) o.on_finish(rr.checks.back());
      continue;
    }
    if (interrupt_requested().load()) {
      rr.incomplete = true;
      break;
    }
    if (o.on_start) o.on_start(spec, i, mine.size());
    result::check_result c;
    c.name = spec.name;
    c.probe = spec.probe;
    const auto c0 = clock_type::now();
    try {
      find_runner(spec.probe)->run(spec, ctx, c);
      const bool held = std::all_of(c.gates.begin(), c.gates.end(), [](const auto& g) { return g.held; });
      c.outcome = held ? result::status::m_pass : result::status::m_fail;
    } catch (const interrupted_error&) {
      rr.incomplete = true;
      break;
    } catch (const interrupted&) {  // a signal while a child process ran (interrupt.hpp)
      rr.incomplete = true;
      break;
    } catch (const error& e) {
      c.outcome = result::status::m_error;
      c.error_code = static_cast<int>(e.code());
      c.message = e.what();
    } catch (const std::bad_alloc&) {
      c.outcome = result::status::m_error;
      c.error_code = 2;
      c.message = "out of memory (case too large for this machine)";
    } catch (const std::exception& e) {
      c.outcome = result::status::m_error;
      c.error_code = 3;
      c.message = fmt::format("internal error: {}", e.what());
    }
    c.seconds = std::chrono::duration<double>(clock_type::now() - c0).count();
    jr.append(result::to_json(c));
    rr.checks.push_back(std::move(c));
    if (o.on_finish) o.on_finish(rr.checks.back());
  }
  if (rr.checks.size() < mine.size()) rr.incomplete = true;
  for (std::size_t i = rr.checks.size(); i < mine.size(); ++i)
    rr.not_run.push_back(mine[i]->probe + ":" + mine[i]->name);
  rr.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  return rr;
}

}  // namespace numprobe::scenario
