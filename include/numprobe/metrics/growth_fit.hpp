#pragma once
// Growth of error with length: least-squares fit of log(error) against log(key tiles).
#include <string>
#include <vector>

namespace numprobe::metrics {

struct growth_fit {
  double slope = 0.0;         // d log(error) / d log(tiles)
  double slope_stderr = 0.0;  // standard error of the slope from the fit residuals
  double intercept = 0.0;
  int points = 0;             // finite, positive points used
  std::string verdict = "flat";  // "flat" or "grows"
};

// The slope above which error is said to grow. Basis: rounding error of a correctly held
// state is independent of length (slope ~0), a random-walk accumulation gives at most 0.5, and
// a running quantity held in the wrong dtype gives slopes well above 0.5 (NUMERICS.md). 0.25
// separates "flat" from a real trend while tolerating noise.
inline constexpr double k_growth_slope_threshold = 0.25;

// x: lengths in key tiles (> 0); y: errors. Non-finite or non-positive errors are skipped
// (NaN points are reported separately by the caller). Verdict "grows" needs the slope above
// the threshold and two standard errors above zero.
[[nodiscard]] growth_fit fit_growth(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace numprobe::metrics
