#pragma once
// The templated reference (DESIGN.md, "The reference"): the definition of attention written
// out loop by loop, in any real type. It is instantiated for double here and for
// boost::multiprecision::cpp_bin_float_50 by the tests that prove the double paths' error.
// Include this header to instantiate it for another type; math calls are found by ADL.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "numprobe/reference/attention.hpp"
#include "reference/attention_common.hpp"

namespace numprobe::reference {
namespace detail {

// Accumulator with an accuracy far below any format under test. In double it is Neumaier's
// compensated sum, and each product's rounding error (recovered exactly with an fma) goes into
// the compensation, so a D-term dot product is nearly correctly rounded. Types with many more
// digits than double (50 decimal digits) need no compensation to prove a 1e-12 bound.
template <class Real>
class accurate_sum {
 public:
  static constexpr bool k_compensated = std::numeric_limits<Real>::digits <= 64;

  void add(const Real& x) {
    if constexpr (k_compensated) {
      const Real t = m_sum + x;
      using std::abs;
      if (abs(m_sum) >= abs(x)) m_comp += (m_sum - t) + x;
      else m_comp += (x - t) + m_sum;
      m_sum = t;
    } else {
      m_sum += x;
    }
  }
  void add_product(const Real& a, const Real& b) {
    if constexpr (std::is_same_v<Real, double>) {
      const double p = a * b;
      m_comp += std::fma(a, b, -p);  // the exact rounding error of p
      add(p);
    } else {
      add(a * b);
    }
  }
  [[nodiscard]] Real value() const {
    if constexpr (k_compensated) return m_sum + m_comp;
    else return m_sum;
  }

 private:
  Real m_sum = Real(0);
  Real m_comp = Real(0);
};

}  // namespace detail

template <class Real>
attention_output attention_generic(const attention_case& c, std::span<const double> q_rows,
                                   std::span<const std::int64_t> rows, std::span<const double> k,
                                   std::span<const double> v) {
  using std::exp;
  using std::log;
  using std::tanh;
  detail::check_attention_args(c, q_rows, rows, k, v, "reference::attention_generic");
  attention_output out = make_poisoned_output(std::vector<std::int64_t>(rows.begin(), rows.end()),
                                              c.heads, c.head_dim);
  const std::int64_t n_queries = c.t(), n_keys = c.seq, dims = c.head_dim;
  const std::int64_t group = c.group();
  const Real scale = Real(c.softmax_scale());
  const Real cap = Real(c.softcap);
  const bool capped = c.softcap > 0;
  const auto n_items = static_cast<std::int64_t>(rows.size()) * c.heads;

#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t item = 0; item < n_items; ++item) {
    const std::int64_t i = item / c.heads, h = item % c.heads;
    const std::int64_t b = rows[static_cast<std::size_t>(i)] / n_queries;
    const std::int64_t t = rows[static_cast<std::size_t>(i)] % n_queries;
    const std::int64_t kv_head = h / group;  // GQA: consecutive query heads share a KV head
    const key_range keys = visible_keys(c, b, t);
    const double* q = q_rows.data() + (i * c.heads + h) * dims;
    double* o = out.o.data() + (i * c.heads + h) * dims;
    double& lse = out.lse[static_cast<std::size_t>(i * c.heads + h)];
    if (keys.size() == 0) {  // fully masked row: defined as O = 0, LSE = -inf
      std::fill(o, o + dims, 0.0);
      lse = -std::numeric_limits<double>::infinity();
      continue;
    }
    auto kv_offset = [&](std::int64_t j) { return ((b * n_keys + j) * c.kv_heads + kv_head) * dims; };

    std::vector<Real> logits(static_cast<std::size_t>(keys.size()));
    for (std::int64_t j = keys.begin; j < keys.end; ++j) {
      detail::accurate_sum<Real> dot;
      const double* kj = k.data() + kv_offset(j);
      for (std::int64_t d = 0; d < dims; ++d) dot.add_product(Real(q[d]), Real(kj[d]));
      Real x = scale * dot.value();
      if (capped) x = cap * tanh(x / cap);
      logits[static_cast<std::size_t>(j - keys.begin)] = x;
    }
    Real row_max = logits[0];
    for (const Real& x : logits)
      if (x > row_max) row_max = x;
    // Max-subtracted: every weight is in (0, 1] and the largest is exactly 1, so nothing
    // overflows however large the logits are.
    detail::accurate_sum<Real> mass;
    for (Real& x : logits) {
      x = exp(x - row_max);
      mass.add(x);
    }
    const Real total = mass.value();
    for (std::int64_t d = 0; d < dims; ++d) {
      detail::accurate_sum<Real> acc;
      for (std::int64_t j = keys.begin; j < keys.end; ++j)
        acc.add_product(logits[static_cast<std::size_t>(j - keys.begin)], Real(v[kv_offset(j) + d]));
      o[d] = static_cast<double>(Real(acc.value() / total));
    }
    lse = static_cast<double>(Real(row_max + log(total)));
  }
  return out;
}

}  // namespace numprobe::reference
