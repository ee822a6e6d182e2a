#include "probes/invariance/bit_comparison.hpp"

#include <bit>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "numprobe/base/error.hpp"

namespace numprobe::probes {
namespace {

// The index of a value on its dtype's grid: 0 at zero, one step per representable value,
// negative below zero. Subnormals take the first 2^p steps, then each binade 2^p more.
double grid_index(const formats::format_info& f, double x) {
  const double ax = std::fabs(x);
  if (ax == 0.0) return 0.0;
  const double steps = std::ldexp(1.0, f.mantissa_bits);
  double idx = 0.0;
  if (ax < f.min_normal && f.min_subnormal > 0.0) {
    idx = ax / f.min_subnormal;
  } else {
    int e = 0;
    const double frac = std::frexp(ax, &e);  // ax = frac * 2^e, frac in [0.5, 1)
    const int emin = std::ilogb(f.min_normal);
    idx = static_cast<double>(e - 1 - emin) * steps + (2.0 * frac - 1.0) * steps + steps;
  }
  return x < 0 ? -idx : idx;
}

std::size_t bin_of(double ulp) {
  if (!std::isfinite(ulp)) return k_ulp_bins - 1;
  if (ulp <= 0.0) return 0;
  const auto k = static_cast<std::size_t>(std::ceil(std::log2(ulp))) + 1;
  return std::min(k, k_ulp_bins - 2);
}

}  // namespace

std::string ulp_bin_label(std::size_t bin) {
  if (bin == 0) return "0";
  if (bin == k_ulp_bins - 1) return "nonfinite";
  if (bin == 1) return "1";
  if (bin == 2) return "2";
  const auto lo = (std::int64_t{1} << (bin - 2)) + 1, hi = std::int64_t{1} << (bin - 1);
  if (bin == k_ulp_bins - 2) return fmt::format(">{}", lo - 1);
  return fmt::format("{}-{}", lo, hi);
}

void bit_comparison::merge(const bit_comparison& o) {
  compared += o.compared;
  differing += o.differing;
  max_ulp = std::max(max_ulp, o.max_ulp);
  for (std::size_t i = 0; i < histogram.size(); ++i) histogram[i] += o.histogram[i];
  if (first.row < 0) first = o.first;
}

nlohmann::json bit_comparison::histogram_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t i = 0; i < histogram.size(); ++i)
    if (histogram[i] > 0) j[ulp_bin_label(i)] = histogram[i];
  return j;
}

double ulp_distance(formats::format_id dtype, double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
  const auto& f = formats::info(dtype);
  return std::fabs(grid_index(f, a) - grid_index(f, b));
}

bit_comparison compare_bits(formats::format_id dtype, std::span<const double> a, std::span<const double> b,
                            std::span<const std::int64_t> positions, std::int64_t heads, std::int64_t dim) {
  const auto per_row = static_cast<std::size_t>(heads * dim);
  if (a.size() != b.size() || a.size() != positions.size() * per_row)
    throw_backend_error("invariance", fmt::format("outputs of {} and {} elements for {} rows", a.size(), b.size(),
                                                  positions.size()));
  bit_comparison c;
  c.compared = static_cast<std::int64_t>(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<std::uint64_t>(a[i]) == std::bit_cast<std::uint64_t>(b[i])) continue;
    const double u = ulp_distance(dtype, a[i], b[i]);
    ++c.differing;
    ++c.histogram[bin_of(u)];
    c.max_ulp = std::max(c.max_ulp, u);
    if (c.first.row < 0) {
      const std::size_t r = i / per_row, rest = i % per_row;
      c.first = {positions[r], static_cast<std::int64_t>(rest / static_cast<std::size_t>(dim)),
                 static_cast<std::int64_t>(rest % static_cast<std::size_t>(dim)), a[i], b[i], u};
    }
  }
  return c;
}

}  // namespace numprobe::probes
