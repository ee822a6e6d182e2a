#pragma once
// Gates and histograms built from measurements, for every probe's result (and the scenario
// runners that wrap them).
#include <optional>
#include <string>
#include <vector>

#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"

namespace numprobe::result {

// A bound evaluated on a measurement (nullopt: not measured, which never holds).
[[nodiscard]] gate evaluate_gate(const bound& b, std::optional<double> measured, const std::string& case_id);

// A bound over a sweep holds when it holds at every point: the gate shows the worst point
// (largest for <=/<, smallest for >=/>) and its case id; a point that could not measure the
// metric (nullopt or NaN) is the worst of all. `metric(point, name)` and `case_of(point)` read
// a point.
template <class Points, class Metric, class CaseOf>
[[nodiscard]] gate worst_point_gate(const bound& b, const Points& points, Metric metric, CaseOf case_of,
                                    const std::string& base_case) {
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
[[nodiscard]] histogram log_histogram(const std::vector<double>& values, int bins, std::string title,
                                      std::string x_label);

}  // namespace numprobe::result
