#include "numprobe/metrics/growth_fit.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace numprobe::metrics {
namespace {

int severity(const std::string& verdict) {
  if (verdict == "grows") return 2;
  if (verdict == "insufficient") return 1;
  return 0;
}

}  // namespace

loglog_fit fit_loglog(const std::vector<double>& x, const std::vector<double>& y, const growth_rule& rule) {
  loglog_fit f;
  std::vector<double> lx, ly;
  int usable = 0;
  double x_lo = 0, x_hi = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (!(x[i] > 0) || !std::isfinite(x[i]) || !std::isfinite(y[i]) || y[i] < 0) continue;
    if (usable == 0 || x[i] < x_lo) x_lo = x[i];
    if (usable == 0 || x[i] > x_hi) x_hi = x[i];
    ++usable;
    if (y[i] > 0) {
      lx.push_back(std::log(x[i]));
      ly.push_back(std::log(y[i]));
    }
  }
  f.points = usable;
  if (usable < k_growth_min_points || !(x_hi > x_lo)) return f;  // insufficient
  if (lx.empty()) {  // every usable error is exactly 0: nothing grows
    f.slope = f.slope_stderr = 0.0;
    f.range_growth = 1.0;
    f.fitted_at_max = 0.0;
    f.verdict = "flat";
    return f;
  }
  if (lx.size() < static_cast<std::size_t>(k_growth_min_points)) return f;  // insufficient
  const double n = static_cast<double>(lx.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < lx.size(); ++i) {
    mx += lx[i];
    my += ly[i];
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < lx.size(); ++i) {
    sxx += (lx[i] - mx) * (lx[i] - mx);
    sxy += (lx[i] - mx) * (ly[i] - my);
  }
  if (!(sxx > 0)) return f;  // the positive points share one x: insufficient
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  double ssr = 0;
  for (std::size_t i = 0; i < lx.size(); ++i) {
    const double r = ly[i] - (f.intercept + f.slope * lx[i]);
    ssr += r * r;
  }
  f.slope_stderr = std::sqrt(ssr / (n - 2.0) / sxx);
  const double lx_lo = *std::min_element(lx.begin(), lx.end());
  const double lx_hi = *std::max_element(lx.begin(), lx.end());
  f.range_growth = std::exp(f.slope * (lx_hi - lx_lo));
  f.fitted_at_max = std::exp(f.intercept + f.slope * lx_hi);
  const bool grows = f.slope >= rule.min_slope && f.slope - rule.k_stderr * f.slope_stderr > 0.0 &&
                     f.range_growth >= rule.min_range_growth &&
                     (rule.min_end_value <= 0.0 || f.fitted_at_max >= rule.min_end_value);
  f.verdict = grows ? "grows" : "flat";
  return f;
}

namespace {

growth_fit from_error_fit(loglog_fit e) {
  growth_fit g;
  g.slope = e.slope;
  g.slope_stderr = e.slope_stderr;
  g.intercept = e.intercept;
  g.points = e.points;
  g.verdict = e.verdict;
  g.error = std::move(e);
  return g;
}

}  // namespace

growth_fit fit_growth(const std::vector<double>& x, const std::vector<double>& y) {
  return from_error_fit(fit_loglog(x, y, k_error_growth_rule));
}

growth_fit fit_growth(const std::vector<double>& x, const std::vector<double>& error,
                      const std::vector<double>& ratio) {
  growth_fit g = from_error_fit(fit_loglog(x, error, k_error_growth_rule));
  g.ratio = fit_loglog(x, ratio, k_ratio_growth_rule);
  g.has_ratio = true;
  if (g.error.verdict == "grows" || g.ratio.verdict == "grows") g.verdict = "grows";
  else if (g.error.verdict == "insufficient" || g.ratio.verdict == "insufficient") g.verdict = "insufficient";
  else g.verdict = "flat";
  return g;
}

std::string growth_rule_text(bool with_ratio) {
  auto one = [](const char* name, const growth_rule& r) {
    std::string s = fmt::format("{} slope >= {:g} and slope - {:g} stderr > 0 and fitted growth over the range >= {:g}x",
                                name, r.min_slope, r.k_stderr, r.min_range_growth);
    if (r.min_end_value > 0) s += fmt::format(" and fitted value at the longest length >= {:g}", r.min_end_value);
    return s;
  };
  std::string s = "grows if " + one("rel_rms", k_error_growth_rule);
  if (with_ratio) s += ", or if " + one("ratio_to_naive", k_ratio_growth_rule);
  s += fmt::format("; insufficient with fewer than {} usable points", k_growth_min_points);
  return s;
}

bool more_severe(const growth_fit& a, const growth_fit& b) {
  const int sa = severity(a.verdict), sb = severity(b.verdict);
  if (sa != sb) return sa > sb;
  return a.slope > b.slope;
}

bool is_growth_metric(const std::string& name) {
  return name == "growth.slope" || name == "growth.ratio_slope";
}

std::optional<double> growth_metric(const growth_fit& g, const std::string& name) {
  if (name == "growth.slope") return g.error.slope;
  if (name == "growth.ratio_slope") return g.has_ratio ? g.ratio.slope : loglog_fit::k_nan;
  return std::nullopt;
}

}  // namespace numprobe::metrics
