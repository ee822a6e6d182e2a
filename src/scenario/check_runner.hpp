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

}  // namespace numprobe::scenario

namespace numprobe::scenario {

// A bound evaluated on a measurement (nullopt: not measured, which never holds).
[[nodiscard]] result::gate evaluate_gate(const bound& b, std::optional<double> measured,
                                         const std::string& case_id);

// A bound over a sweep holds when it holds at every point: the gate shows the worst point
// (largest for <=/<, smallest for >=/>) and its case id; a point that could not measure the
// metric (nullopt or NaN) is the worst of all. `metric(point, name)` and `case_of(point)` read
// a point.
template <class Points, class Metric, class CaseOf>
[[nodiscard]] result::gate worst_point_gate(const bound& b, const Points& points, Metric metric,
                                            CaseOf case_of, const std::string& base_case) {
  const bool lower = b.op == bound_op::m_le || b.op == bound_op::m_lt;
  std::optional<double> worst;
  std::string worst_case = base_case;
  for (const auto& p : points) {
    const std::optional<double> m = metric(p, b.metric);
    if (!m || *m != *m) return evaluate_gate(b, std::nullopt, case_of(p));
    if (!worst || (lower ? *m > *worst : *m < *worst)) {
      worst = *m;
      worst_case = case_of(p);
    }
  }
  return evaluate_gate(b, worst, worst_case);
}

// A histogram of log10 of the positive finite values, `bins` bins (zeros and non-finite values
// are left out; the title says how many).
[[nodiscard]] result::histogram log_histogram(const std::vector<double>& values, int bins,
                                              std::string title, std::string x_label);

}  // namespace numprobe::scenario
