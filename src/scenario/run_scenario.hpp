#pragma once
// Runs a scenario's checks: filter, shard, journal, resume, interruption, per-check errors.
#include <atomic>
#include <functional>
#include <string>

#include "numprobe/core/result.hpp"
#include "src/scenario/scenario.hpp"

namespace numprobe::scenario {

struct shard_spec {
  int index = 0;  // 0-based
  int count = 1;
  [[nodiscard]] bool all() const { return count == 1; }
  [[nodiscard]] std::string text() const { return all() ? "" : std::to_string(index) + "/" + std::to_string(count); }
};

// "i/N" with 0 <= i < N; throws an input error naming --shard.
[[nodiscard]] shard_spec parse_shard(const std::string& text);

struct run_options {
  std::string backend_override;  // --backend
  int device_override = -1;      // run --mpi: every check on the rank's GPU (its local rank); -1: none
  std::string filter;            // --filter REGEX, matched against check names and probes
  shard_spec shard;
  std::string journal;           // PATH of the journal (empty: none)
  bool resume = false;           // reuse finished checks from the journal
  std::function<void(const check_spec&, std::size_t index, std::size_t total)> on_start;
  std::function<void(const result::check_result&)> on_finish;
};

// The checks this run owns: filtered, then every N-th starting at i (deterministic shares:
// shards 0..N-1 together cover each selected check exactly once).
[[nodiscard]] std::vector<const check_spec*> select_checks(const scenario& sc, const run_options& o);

// Set by a SIGINT handler; checked between checks and between drift points.
[[nodiscard]] std::atomic<bool>& interrupt_requested();

// Runs the selected checks. A check that throws becomes an ERROR result carrying the error's
// code and text; the others still run. Interrupted runs return what finished, marked incomplete.
[[nodiscard]] result::run_result run_scenario(const scenario& sc, const run_options& o);

}  // namespace numprobe::scenario
