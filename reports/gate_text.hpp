#pragma once
// Shared by the text writers: how a gate and its measured value read.
#include <string>

#include "numprobe/core/result.hpp"

namespace numprobe::reports::detail {

// The measured value in its metric's format hint ("sci" when the metric is not listed).
inline std::string measured_text(const result::check_result& c, const result::gate& g) {
  const auto* m = c.find_metric(g.metric);
  return result::format_value(g.measured, m ? m->format : "sci");
}

// "rel_rms<=0.004 (measured 2.1e-03)"
inline std::string gate_text(const result::check_result& c, const result::gate& g) {
  return g.bound + " (measured " + measured_text(c, g) + ")";
}

// A gate's basis, or the plain statement that none was given (NUMERICS.md rule 3: every
// bound has a basis; a report must not let a bare number pass for a justified one).
// A default gate says so: the user did not choose it and can drop it (--no-default-bound).
inline std::string basis_text(const result::gate& g) {
  const std::string basis = g.basis.empty() ? "no basis given" : g.basis;
  return g.is_default ? "default gate (no --bound given; --no-default-bound drops it): " + basis : basis;
}

}  // namespace numprobe::reports::detail
