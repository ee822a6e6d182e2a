#pragma once
// Shared pieces of the reference tests: inputs for a case, the error metric of the
// multiprecision proof, and a brute-force attention written from NUMERICS.md with an
// element-wise mask predicate (no ranges, no code shared with reference/).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/attention_output.hpp"

namespace numprobe::test {

// gtest names allow [A-Za-z0-9_] only.
inline std::string gtest_name(const std::string& id) {
  std::string s = id;
  for (char& ch : s)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))) ch = '_';
  return s;
}

struct case_data {
  attention_case c;
  std::vector<std::int64_t> rows;
  std::vector<double> q, k, v;
};

// Seeded inputs of the case (rounded to its dtype, as a kernel would see them) for `rows`,
// or for every row when `rows` is empty.
inline case_data make_case_data(const attention_case& c, std::vector<std::int64_t> rows = {}) {
  const attention_inputs in(c, false);
  if (rows.empty())
    for (std::int64_t r = 0; r < c.rows(); ++r) rows.push_back(r);
  case_data out{c, rows, in.q_rows(rows), {}, {}};
  out.k.assign(in.k().begin(), in.k().end());
  out.v.assign(in.v().begin(), in.v().end());
  return out;
}

// The element-wise mask, written from NUMERICS.md: query i sits at pos = S - T + i
// (bottom-right); causal sees j <= pos; top-left sees j <= i; a window sees j in (pos - W, pos];
// ranges see j in [begin, end).
inline bool key_visible(const attention_case& c, std::int64_t i, std::int64_t j) {
  const std::int64_t pos = c.seq - c.t() + i;
  switch (c.mask) {
    case mask_kind::m_none: return true;
    case mask_kind::m_causal: return j <= pos;
    case mask_kind::m_causal_top_left: return j <= i;
    case mask_kind::m_window: return j > pos - c.window && j <= pos;
    case mask_kind::m_ranges:
      return j >= c.ranges[static_cast<std::size_t>(i)].begin &&
             j < c.ranges[static_cast<std::size_t>(i)].end;
  }
  return false;
}

// Brute force in long double (64-bit significand, 11 more bits than double): every key is
// tested with the predicate; the running sums are plain.
inline attention_output brute_force_attention(const case_data& d) {
  const attention_case& c = d.c;
  attention_output out = make_poisoned_output(d.rows, c.heads, c.head_dim);
  const std::int64_t D = c.head_dim, S = c.seq;
  const long double scale = c.softmax_scale();
  for (std::size_t i = 0; i < d.rows.size(); ++i) {
    const std::int64_t b = d.rows[i] / c.t(), t = d.rows[i] % c.t();
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::int64_t g = h / (c.heads / c.kv_heads);
      std::vector<long double> w(static_cast<std::size_t>(S), 0.0L);
      std::vector<char> vis(static_cast<std::size_t>(S), 0);
      long double mx = -std::numeric_limits<long double>::infinity();
      for (std::int64_t j = 0; j < S; ++j) {
        if (!key_visible(c, t, j)) continue;
        long double dot = 0;
        for (std::int64_t e = 0; e < D; ++e)
          dot += static_cast<long double>(d.q[(i * c.heads + h) * D + e]) *
                 d.k[((b * S + j) * c.kv_heads + g) * D + e];
        long double x = scale * dot;
        if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
        w[j] = x;
        vis[j] = 1;
        mx = std::max(mx, x);
      }
      long double sum = 0;
      for (std::int64_t j = 0; j < S; ++j)
        if (vis[j]) sum += (w[j] = std::exp(w[j] - mx));
      for (std::int64_t e = 0; e < D; ++e) {
        long double acc = 0;
        for (std::int64_t j = 0; j < S; ++j)
          if (vis[j]) acc += w[j] * d.v[((b * S + j) * c.kv_heads + g) * D + e];
        out.o_at(i, h, e) = sum > 0 ? static_cast<double>(acc / sum) : 0.0;
      }
      out.lse[i * c.heads + h] = sum > 0 ? static_cast<double>(mx + std::log(sum))
                                         : -std::numeric_limits<double>::infinity();
    }
  }
  return out;
}

// Worst per-(row, head) relative errors of `got` against `want` (the metric):
// ||o - o_ref|| / ||o_ref|| and |lse - lse_ref| / max(1, |lse_ref|). A fully masked row of
// `want` must be O = 0, LSE = -inf exactly in `got`, else the error is infinite. NaN anywhere
// in `got` is infinite error too.
struct row_error {
  double o = 0;
  double lse = 0;
};

inline row_error max_row_error(const attention_output& got, const attention_output& want) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  row_error e;
  if (got.rows != want.rows || got.o.size() != want.o.size() || got.lse.size() != want.lse.size())
    return {inf, inf};
  for (std::size_t i = 0; i < want.rows.size(); ++i)
    for (std::int64_t h = 0; h < want.heads; ++h) {
      const double lw = want.lse[i * want.heads + h], lg = got.lse[i * want.heads + h];
      double diff2 = 0, norm2 = 0;
      bool nan = std::isnan(lg);
      for (std::int64_t d = 0; d < want.head_dim; ++d) {
        const double a = got.o_at(i, h, d), b = want.o_at(i, h, d);
        nan = nan || std::isnan(a);
        diff2 += (a - b) * (a - b);
        norm2 += b * b;
      }
      if (nan) return {inf, inf};
      if (std::isinf(lw)) {
        if (lg != lw || diff2 != 0) return {inf, inf};
        continue;
      }
      e.o = std::max(e.o, norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2));
      e.lse = std::max(e.lse, std::fabs(lg - lw) / std::max(1.0, std::fabs(lw)));
    }
  return e;
}

}  // namespace numprobe::test
