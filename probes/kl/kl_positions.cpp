#include "probes/kl/kl_positions.hpp"

#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result.hpp"

namespace numprobe::probes {
namespace {

struct line_fit {
  double slope = 0.0, t = 0.0, r2 = 0.0;
};

// Ordinary least squares of y on x, in double, centred sums (two passes, so a large x offset
// does not cancel). t = slope / se(slope), se^2 = (SS_res / (n - 2)) / S_xx.
line_fit least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto n = x.size();
  if (n < 2) return {nan, nan, nan};
  double mx = 0.0, my = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxx = 0.0, sxy = 0.0, syy = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  line_fit f;
  f.slope = sxx > 0.0 ? sxy / sxx : nan;
  double ss_res = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = y[i] - my - f.slope * (x[i] - mx);
    ss_res += e * e;
  }
  f.r2 = syy > 0.0 ? std::max(0.0, 1.0 - ss_res / syy) : 0.0;
  if (n < 3) {
    f.t = nan;
  } else {
    const double se = std::sqrt(ss_res / static_cast<double>(n - 2) / sxx);
    f.t = se > 0.0 ? f.slope / se : (f.slope == 0.0 ? 0.0 : std::copysign(INFINITY, f.slope));
  }
  return f;
}

}  // namespace

void check_position_flags(std::int64_t positions, std::int64_t seq_len, std::int64_t rows) {
  if (positions < 0) throw_input_error("--positions", fmt::format("must be at least 1, got {}", positions));
  if (seq_len < 0) throw_input_error("--seq-len", fmt::format("must be at least 1, got {}", seq_len));
  if (seq_len > 0 && positions == 0)
    throw_input_error("--seq-len", "needs --positions N (the number of position bins)");
  if (positions == 0) return;
  if (seq_len > 0 && rows % seq_len != 0)
    throw_input_error("--seq-len", fmt::format("{} rows are not a whole number of sequences of {} "
                                               "positions",
                                               rows, seq_len));
  const std::int64_t p = seq_len > 0 ? seq_len : rows;
  if (positions > p)
    throw_input_error("--positions", fmt::format("{} bins for {} positions ({}); at most {}", positions, p,
                                                 seq_len > 0 ? "--seq-len" : "rows", p));
}

kl_positions kl_by_position(std::span<const metrics::kl_row> rows, std::int64_t bins, std::int64_t seq_len) {
  kl_positions out;
  out.bins_asked = bins;
  out.seq_len = seq_len;
  const auto n = static_cast<std::int64_t>(rows.size());
  check_position_flags(bins, seq_len, n);
  if (bins == 0) return out;
  const std::int64_t p = seq_len > 0 ? seq_len : n;
  out.sequences = n / p;
  std::vector<double> x, lx, y;
  for (std::int64_t b = 0; b < bins; ++b) {
    kl_position_bin bin;
    bin.lo = b * p / bins;
    bin.hi = (b + 1) * p / bins - 1;
    std::vector<double> v;
    v.reserve(static_cast<std::size_t>((bin.hi - bin.lo + 1) * out.sequences));
    for (std::int64_t s = 0; s < out.sequences; ++s)
      for (std::int64_t q = bin.lo; q <= bin.hi; ++q) v.push_back(rows[static_cast<std::size_t>(s * p + q)].kld);
    bin.rows = static_cast<std::int64_t>(v.size());
    const auto m = metrics::mean_with_stderr(v);
    bin.kld_mean = m.mean;
    bin.kld_stderr = m.stderr_;
    bin.kld_p99 = metrics::interpolated_percentile(v, 0.99);
    const double centre = 0.5 * static_cast<double>(bin.lo + bin.hi);
    x.push_back(centre);
    lx.push_back(std::log2(centre + 1.0));
    y.push_back(bin.kld_mean);
    out.bins.push_back(bin);
  }
  const auto lin = least_squares(x, y);
  const auto lg = least_squares(lx, y);
  auto& f = out.fit;
  f.slope_per_1k = 1000.0 * lin.slope;
  f.slope_t = lin.t;
  f.r2 = lin.r2;
  f.log2_slope = lg.slope;
  f.log2_r2 = lg.r2;
  // Identical logits have KL 0 in every bin: no growth (1), not 0/0. A first bin at 0 under a
  // later one above it is unbounded growth (+inf).
  const double first = out.bins.front().kld_mean, last = out.bins.back().kld_mean;
  f.last_over_first = first > 0.0 ? last / first
                      : last > 0.0 ? std::numeric_limits<double>::infinity()
                                   : 1.0;
  f.grows = bins >= 3 && lin.slope > 0.0 && lin.t >= 3.0;
  return out;
}

std::optional<double> position_metric(const kl_positions& p, const std::string& name) {
  if (name.rfind("positions.", 0) != 0) return std::nullopt;
  if (p.bins_asked == 0) throw_input_error("--bound", "'" + name + "' needs --positions N");
  const auto& f = p.fit;
  // One bin fits nothing: the positions metrics are not measured, and a gate on them fails.
  const bool known = name == "positions.last_over_first" || name == "positions.slope_per_1k" ||
                     name == "positions.log2_slope" || name == "positions.r2";
  if (known && p.bins.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  if (name == "positions.last_over_first") return f.last_over_first;
  if (name == "positions.slope_per_1k") return f.slope_per_1k;
  if (name == "positions.log2_slope") return f.log2_slope;
  if (name == "positions.r2") return f.r2;
  throw_input_error("--bound", "unknown kl metric '" + name +
                                   "' (known: positions.last_over_first, positions.slope_per_1k, "
                                   "positions.log2_slope, positions.r2)");
}

nlohmann::json to_json(const kl_positions& p) {
  using result::json_number;
  nlohmann::json j;
  j["bins_asked"] = p.bins_asked;
  j["seq_len"] = p.seq_len;
  j["sequences"] = p.sequences;
  j["bins"] = nlohmann::json::array();
  for (const auto& b : p.bins)
    j["bins"].push_back({{"lo", b.lo},
                         {"hi", b.hi},
                         {"rows", b.rows},
                         {"kld_mean", json_number(b.kld_mean)},
                         {"kld_stderr", json_number(b.kld_stderr)},
                         {"kld_p99", json_number(b.kld_p99)}});
  const auto& f = p.fit;
  j["fit"] = {{"slope_per_1k", json_number(f.slope_per_1k)}, {"slope_t", json_number(f.slope_t)},
              {"r2", json_number(f.r2)},                     {"log2_slope", json_number(f.log2_slope)},
              {"log2_r2", json_number(f.log2_r2)},           {"last_over_first", json_number(f.last_over_first)},
              {"grows", f.grows}};
  return j;
}

}  // namespace numprobe::probes
