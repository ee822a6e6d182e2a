// Gates and histograms built from measurements: shared by the probes (their results) and the
// scenario runners.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "numprobe/core/result_gates.hpp"

namespace numprobe::result {

gate evaluate_gate(const bound& b, std::optional<double> measured, const std::string& case_id) {
  gate g;
  g.bound = b.text();
  g.metric = b.metric;
  g.basis = b.basis;
  g.is_default = b.is_default;
  g.case_id = case_id;
  g.measured = measured.value_or(std::numeric_limits<double>::quiet_NaN());
  g.held = measured.has_value() && b.holds(*measured);
  return g;
}

histogram log_histogram(const std::vector<double>& values, int bins, std::string title,
                                std::string x_label) {
  histogram h;
  h.x_label = std::move(x_label);
  h.log_x = true;
  std::vector<double> logs;
  std::size_t skipped = 0;
  for (double v : values) {
    if (std::isfinite(v) && v > 0) logs.push_back(std::log10(v));
    else ++skipped;
  }
  h.title = skipped ? fmt::format("{} ({} zero or non-finite values not shown)", title, skipped) : title;
  if (logs.empty()) return h;
  const auto [mn, mx] = std::minmax_element(logs.begin(), logs.end());
  double lo = std::floor(*mn * 4) / 4, hi = std::ceil(*mx * 4) / 4;
  if (hi <= lo) hi = lo + 0.25;
  h.counts.assign(static_cast<std::size_t>(bins), 0.0);
  for (int i = 0; i <= bins; ++i) h.edges.push_back(std::pow(10.0, lo + (hi - lo) * i / bins));
  for (double l : logs) {
    auto i = static_cast<int>((l - lo) / (hi - lo) * bins);
    h.counts[static_cast<std::size_t>(std::clamp(i, 0, bins - 1))] += 1;
  }
  return h;
}

}  // namespace numprobe::result
