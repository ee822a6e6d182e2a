#pragma once
// Growth of error with length: least-squares fits of log(error) and of log(ratio_to_naive)
// against log(key tiles), and the verdict "grows", "flat" or "insufficient" under one stated
// rule (growth_rule below; the text is in the JSON as growth.rule).
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace numprobe::metrics {

// When a fitted series is said to grow: all of
//   slope >= min_slope                          (the effect is large enough to matter)
//   slope - k_stderr * slope_stderr > 0         (and not noise)
//   exp(slope * log(x_max / x_min)) >= min_range_growth   (the sweep saw it grow that much)
//   fitted y at x_max >= min_end_value          (ratio only: the kernel ends worse than naive)
struct growth_rule {
  double min_slope = 0.0;
  double k_stderr = 0.0;
  double min_range_growth = 1.0;
  double min_end_value = 0.0;  // 0: no condition
};

// The slope above which rel_rms is said to grow. Basis: rounding error of a correctly held
// state is independent of length (slope ~0), a random-walk accumulation gives at most 0.5, and
// a running quantity held in the wrong dtype gives slopes well above 0.5 (NUMERICS.md). 0.25
// separates "flat" from a real trend while tolerating noise.
inline constexpr double k_growth_slope_threshold = 0.25;

// The slope above which ratio_to_naive is said to grow. Basis: the ratio divides out what the
// inputs do to the error (kernel and naive baseline see the same inputs), so it is the
// dimensionless error; a healthy kernel's ratio slope is ~0 (at most 0.039 in 224 healthy
// sweeps of docs/measurements/growth_false_alarms_2026-12-01.txt), while the mildest
// accumulation fault known (l rounded to bf16 once per key tile, issue 14) gives 0.25..0.3 on
// a sweep whose rel_rms falls. 0.15 sits between them.
inline constexpr double k_growth_ratio_slope_threshold = 0.15;

// Standard errors the slope must clear. Basis: two standard errors (one-sided ~97.5%) of an
// independent design, times sqrt(3): tile sweeps place three lengths per tile count
// (k*Bk-1, k*Bk, k*Bk+1) on prefixes of the same inputs, so their residuals are nearly
// repeated and the least-squares standard error understates the slope's spread by up to
// sqrt(3). 2 * sqrt(3) = 3.46, rounded to 3.5.
inline constexpr double k_growth_k_stderr = 3.5;

// The fitted growth over the swept range must reach 1.5x. Basis: the slope thresholds are
// meant for sweeps spanning decades of tiles; a range too short to show 1.5x at the minimum
// slope (under 5x in tiles for rel_rms, 15x for the ratio) only sees a few nearby lengths,
// where a steep fitted slope is as likely tile-boundary structure as growth. 1.5x is 3x the
// largest wander of a healthy ratio over 128..4096 (slope 0.039 over 32x tiles: 1.14x).
inline constexpr double k_growth_min_range_growth = 1.5;

// The ratio must end above 1 at the longest length. Basis: kernel and naive baseline both
// round O to the dtype once, so a kernel more precise than the baseline has a ratio below 1
// that can rise as the baseline's error falls toward that common floor; only a kernel that
// ends worse than the same-precision baseline is accumulating error the baseline does not.
inline constexpr double k_growth_ratio_min_end = 1.0;

inline constexpr growth_rule k_error_growth_rule{k_growth_slope_threshold, k_growth_k_stderr,
                                                 k_growth_min_range_growth, 0.0};
inline constexpr growth_rule k_ratio_growth_rule{k_growth_ratio_slope_threshold, k_growth_k_stderr,
                                                 k_growth_min_range_growth, k_growth_ratio_min_end};

// Fewer usable points than this and there is no verdict: "insufficient", never "flat". Basis:
// two points always fit a line exactly (no residual, no standard error).
inline constexpr int k_growth_min_points = 3;

// One fit of log(y) against log(x).
struct loglog_fit {
  static constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
  double slope = k_nan;         // d log(y) / d log(x); NaN when insufficient
  double slope_stderr = k_nan;  // standard error of the slope from the fit residuals
  double intercept = k_nan;
  int points = 0;               // usable points: x > 0, y finite and >= 0
  double range_growth = k_nan;  // exp(slope * log(x_max / x_min)): fitted growth over the sweep
  double fitted_at_max = k_nan; // exp(intercept + slope * log(x_max))
  std::string verdict = "insufficient";  // "flat", "grows" or "insufficient"
};

// Usable points are x > 0 with y finite and >= 0 (NaN points are reported by the caller).
// Fewer than k_growth_min_points usable points, or a single x value: "insufficient". Every
// usable y exactly 0: "flat" with slope 0 (an exactly zero error does not grow). Otherwise
// the positive points are fitted (fewer than k_growth_min_points of them: "insufficient").
[[nodiscard]] loglog_fit fit_loglog(const std::vector<double>& x, const std::vector<double>& y,
                                    const growth_rule& rule);

struct growth_fit {
  // The rel_rms fit's numbers, under their historical names (growth.slope and friends).
  double slope = loglog_fit::k_nan;
  double slope_stderr = loglog_fit::k_nan;
  double intercept = loglog_fit::k_nan;
  int points = 0;
  loglog_fit error;         // log(rel_rms) vs log(x), rule k_error_growth_rule
  loglog_fit ratio;         // log(ratio_to_naive) vs log(x), rule k_ratio_growth_rule
  bool has_ratio = false;   // false: one series (softmax), ratio left empty
  // "grows" when either fit grows; else "insufficient" when either fit is; else "flat".
  std::string verdict = "insufficient";
};

// One series: the error alone (softmax's p_rel_rms vs chunks).
[[nodiscard]] growth_fit fit_growth(const std::vector<double>& x, const std::vector<double>& y);

// Two series over the same x: the error and its ratio to the naive same-precision baseline.
[[nodiscard]] growth_fit fit_growth(const std::vector<double>& x, const std::vector<double>& error,
                                    const std::vector<double>& ratio);

// The rule as one line, for reports (growth.rule).
[[nodiscard]] std::string growth_rule_text(bool with_ratio);

// Which of two fits to report for a set of series (decode sweeps): "grows" before
// "insufficient" before "flat", then the steeper error slope.
[[nodiscard]] bool more_severe(const growth_fit& a, const growth_fit& b);

// Gate metrics on a fit: "growth.slope" (rel_rms) and "growth.ratio_slope" (ratio_to_naive).
// An insufficient fit's slope is NaN, so every bound on it fails. nullopt for other names.
[[nodiscard]] bool is_growth_metric(const std::string& name);
[[nodiscard]] std::optional<double> growth_metric(const growth_fit& g, const std::string& name);

}  // namespace numprobe::metrics
