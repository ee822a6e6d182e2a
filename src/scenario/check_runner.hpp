#pragma once
// The check-runner registry: how a probe becomes a scenario check. A runner declares its
// parameters (checked when a scenario is read), the metrics its bounds may name, and a run
// function that fills a result::check_result. Adding a probe is one runner file plus one
// registration line in runner_registry.cpp.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/core/result.hpp"
#include "numprobe/core/result_gates.hpp"
#include "src/scenario/scenario.hpp"

namespace numprobe::scenario {

struct param_spec {
  std::string name;  // the CLI flag without "--", '-' written as '_'
  param_kind kind = param_kind::m_string;
  std::string help;
};

// What a run offers the runners.
struct run_context {
  std::string backend_override;        // --backend: replaces every check's backend
  int device_override = -1;            // run --mpi: the rank's GPU replaces every check's device (-1: none)
  std::function<bool()> interrupted;   // polled between points; true after Ctrl-C
};

// Thrown from inside a runner when the run is interrupted mid-check.
struct interrupted_error {};

struct check_runner {
  std::string probe;
  std::string description;
  std::vector<param_spec> params;
  // Whether a bound may name this metric.
  std::function<bool(const std::string& metric)> known_metric;
  std::string metric_names;  // for messages: "rel_rms, max_abs, ..."
  // Runs the check: fills name-independent fields (backend, case_id, metrics, gates, plots,
  // details). Throws numprobe::error on bad input or a failing device.
  std::function<void(const check_spec&, const run_context&, result::check_result&)> run;

  [[nodiscard]] const param_spec* find_param(std::string_view name) const;
};

[[nodiscard]] const std::vector<check_runner>& check_runners();
[[nodiscard]] const check_runner* find_runner(std::string_view probe);

// Runner factories, one per probe (registered in runner_registry.cpp).
[[nodiscard]] check_runner attention_runner();
[[nodiscard]] check_runner drift_runner();
[[nodiscard]] check_runner quant_runner();
[[nodiscard]] check_runner bisect_runner();
[[nodiscard]] check_runner softmax_runner();
[[nodiscard]] check_runner kl_runner();
[[nodiscard]] check_runner scan_runner();
[[nodiscard]] check_runner kvcache_runner();
[[nodiscard]] check_runner invariance_runner();

}  // namespace numprobe::scenario

namespace numprobe::scenario {

using result::evaluate_gate;
using result::log_histogram;
using result::worst_point_gate;

}  // namespace numprobe::scenario
