#include "numprobe/metrics/attention_errors.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numeric>

#include "numprobe/base/error.hpp"

namespace numprobe::metrics {

double ulp_at(formats::format_id fmt, double x) {
  const auto& f = formats::info(fmt);
  if (!f.is_float) return 1.0;
  const double a = std::fabs(x);
  const int emin = 1 - f.bias;
  const int e = a > 0 ? std::max(std::ilogb(a), emin) : emin;
  return std::ldexp(1.0, e - f.mantissa_bits);
}

attention_errors compare_attention(const attention_output& cand, const attention_output& ref,
                                   formats::format_id out_dtype) {
  if (cand.rows != ref.rows || cand.heads != ref.heads || cand.head_dim != ref.head_dim ||
      cand.o.size() != ref.o.size() || cand.lse.size() != ref.lse.size())
    throw_backend_error("candidate output",
                        fmt::format("shape mismatch: {} rows x {} heads x {} vs reference {} x {} x {}",
                                    cand.rows.size(), cand.heads, cand.head_dim, ref.rows.size(),
                                    ref.heads, ref.head_dim));
  constexpr double inf = std::numeric_limits<double>::infinity();
  attention_errors e;
  e.lse_known = cand.lse_known;
  e.elements = static_cast<std::int64_t>(ref.o.size());
  const auto d = static_cast<std::size_t>(ref.head_dim);
  double ref_sq = 0.0;
  for (double r : ref.o) ref_sq += r * r;
  const double ref_rms = e.elements ? std::sqrt(ref_sq / static_cast<double>(e.elements)) : 0.0;
  e.rel_floor = std::max(1e-3 * ref_rms, std::numeric_limits<double>::min());
  double err_sq = 0.0;
  double err_dot_ref = 0.0;  // sum of (c - r) * r: the signed bias along the reference
  e.per_row.reserve(ref.rows.size() * static_cast<std::size_t>(ref.heads));
  for (std::size_t i = 0; i < ref.rows.size(); ++i) {
    for (std::int64_t h = 0; h < ref.heads; ++h) {
      row_head_error rh{i, ref.rows[i], h};
      double rs = 0.0, es = 0.0;
      bool bad = false;
      const std::size_t base = (i * static_cast<std::size_t>(ref.heads) + static_cast<std::size_t>(h)) * d;
      for (std::size_t k = 0; k < d; ++k) {
        const double c = cand.o[base + k], r = ref.o[base + k];
        if (std::isnan(c)) { ++rh.o_nan; bad = true; continue; }
        if (std::isinf(c)) { ++rh.o_inf; bad = true; continue; }
        const double diff = std::fabs(c - r);
        err_dot_ref += (c - r) * r;
        rs += r * r;
        es += diff * diff;
        rh.max_abs = std::max(rh.max_abs, diff);
        e.max_rel = std::max(e.max_rel, diff / std::max(std::fabs(r), e.rel_floor));
        e.max_ulp = std::max(e.max_ulp, diff / ulp_at(out_dtype, std::max(std::fabs(r), e.rel_floor)));
      }
      rh.rel_rms = bad ? inf : (rs > 0 ? std::sqrt(es / rs) : std::sqrt(es));
      if (bad) rh.max_abs = inf;
      e.nan_count += rh.o_nan;
      e.inf_count += rh.o_inf;
      err_sq += es;
      e.max_abs = std::max(e.max_abs, rh.max_abs);
      const std::size_t li = i * static_cast<std::size_t>(ref.heads) + static_cast<std::size_t>(h);
      const double cl = cand.lse[li], rl = ref.lse[li];
      rh.lse = cl;
      if (std::isnan(cl)) {
        // Without a given LSE the value is the NaN poison: unknown, so inf but no finding.
        rh.lse_abs = inf;
        rh.lse_nan = cand.lse_known;
      } else if (std::isinf(rl) || std::isinf(cl)) {
        if (cl != rl) { ++e.lse_mismatch_inf; rh.lse_abs = inf; }
        // -inf is the defined LSE of a row with no visible key (the reference says so with its
        // own -inf); anywhere else an infinite LSE is a finding.
        rh.lse_inf = cl == inf || (cl == -inf && std::isfinite(rl));
      } else {
        rh.lse_abs = std::fabs(cl - rl);
      }
      e.lse_nan_count += rh.lse_nan ? 1 : 0;
      e.lse_inf_count += rh.lse_inf ? 1 : 0;
      e.lse_max_abs = std::max(e.lse_max_abs, rh.lse_abs);
      e.per_row.push_back(rh);
    }
  }
  e.rel_rms = ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
  e.bias = ref_sq > 0 ? err_dot_ref / ref_sq : 0.0;
  if (e.nan_count || e.inf_count) {
    e.rel_rms = e.max_abs = e.max_rel = e.max_ulp = inf;
  }
  return e;
}

std::vector<std::size_t> worst_rows(const attention_errors& e, std::size_t n) {
  std::vector<std::size_t> idx(e.per_row.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  n = std::min(n, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(),
                    [&](std::size_t a, std::size_t b) {
                      return e.per_row[a].rel_rms > e.per_row[b].rel_rms;
                    });
  idx.resize(n);
  return idx;
}

}  // namespace numprobe::metrics
