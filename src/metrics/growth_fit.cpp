#include "numprobe/metrics/growth_fit.hpp"

#include <cmath>

namespace numprobe::metrics {

growth_fit fit_growth(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> lx, ly;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i] > 0 && std::isfinite(y[i]) && y[i] > 0) {
      lx.push_back(std::log(x[i]));
      ly.push_back(std::log(y[i]));
    }
  }
  growth_fit g;
  g.points = static_cast<int>(lx.size());
  if (lx.size() < 2) return g;
  const double n = static_cast<double>(lx.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < lx.size(); ++i) { mx += lx[i]; my += ly[i]; }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < lx.size(); ++i) {
    sxx += (lx[i] - mx) * (lx[i] - mx);
    sxy += (lx[i] - mx) * (ly[i] - my);
  }
  if (sxx <= 0) return g;
  g.slope = sxy / sxx;
  g.intercept = my - g.slope * mx;
  if (lx.size() > 2) {
    double ssr = 0;
    for (std::size_t i = 0; i < lx.size(); ++i) {
      const double r = ly[i] - (g.intercept + g.slope * lx[i]);
      ssr += r * r;
    }
    g.slope_stderr = std::sqrt(ssr / (n - 2.0) / sxx);
  }
  const bool significant = g.slope - 2.0 * g.slope_stderr > 0.0;
  g.verdict = (g.slope > k_growth_slope_threshold && significant) ? "grows" : "flat";
  return g;
}

}  // namespace numprobe::metrics
