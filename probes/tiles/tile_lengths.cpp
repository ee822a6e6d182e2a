#include "probes/tiles/tile_lengths.hpp"

#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <set>
#include <string_view>

#include "numprobe/base/error.hpp"
#include "probes/tiles/tile_inference.hpp"

namespace numprobe::probes {
namespace {

// Integers spread evenly in log space over [lo, hi], unique, ascending.
std::vector<std::int64_t> log_spaced(std::int64_t lo, std::int64_t hi, int n) {
  std::set<std::int64_t> s;
  if (n <= 1 || lo == hi) return {lo};
  const double a = std::log(static_cast<double>(lo)), b = std::log(static_cast<double>(hi));
  for (int i = 0; i < n; ++i)
    s.insert(std::llround(std::exp(a + (b - a) * i / (n - 1))));
  return {s.begin(), s.end()};
}

}  // namespace

std::vector<std::int64_t> drift_lengths(const std::string& points, std::int64_t lo,
                                        std::int64_t hi, std::int64_t tile_k) {
  if (lo < 1 || hi < lo)
    throw_input_error("--seq", fmt::format("need 1 <= A <= B in A..B, got {}..{}", lo, hi));
  std::set<std::int64_t> out;
  if (points == "tile") {
    // An opaque kernel whose tile could not be inferred: lengths around every common tile.
    if (tile_k <= 0) return common_tile_lengths(lo, hi);
    const std::int64_t k_lo = std::max<std::int64_t>(1, (lo + tile_k - 1) / tile_k);
    const std::int64_t k_hi = std::max(k_lo, hi / tile_k);
    // About 3 k values per octave of tiles keeps a 1000x sweep near 30 k values (90 points).
    const int n = std::max(2, static_cast<int>(std::ceil(std::log2(double(k_hi) / double(k_lo)) * 1.0)) + 1);
    for (std::int64_t k : log_spaced(k_lo, k_hi, n))
      for (std::int64_t s : {k * tile_k - 1, k * tile_k, k * tile_k + 1})
        if (s >= lo && s <= hi) out.insert(s);
  } else if (points.rfind("log:", 0) == 0) {
    int n = 0;
    const auto* b = points.data() + 4;
    auto [p, ec] = std::from_chars(b, points.data() + points.size(), n);
    if (ec != std::errc() || p != points.data() + points.size() || n < 1 || n > 10000)
      throw_input_error("--points", fmt::format("'{}': expected log:N with 1 <= N <= 10000", points));
    for (auto s : log_spaced(lo, hi, n)) out.insert(s);
  } else {
    std::string_view rest = points;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const auto item = rest.substr(0, comma);
      std::int64_t s = 0;
      auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), s);
      if (ec != std::errc() || p != item.data() + item.size() || s < 1)
        throw_input_error("--points", fmt::format("'{}' is not tile, log:N or a list of positive lengths", points));
      if (s < lo || s > hi)
        throw_input_error("--points", fmt::format("length {} is outside --seq {}..{}", s, lo, hi));
      out.insert(s);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  if (out.empty())
    throw_input_error("--points", fmt::format("no lengths in {}..{} for '{}'", lo, hi, points));
  return {out.begin(), out.end()};
}

}  // namespace numprobe::probes
