#pragma once
// The templated decode reference (see numprobe/reference/decode.hpp), loop by loop.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/reference/decode.hpp"
#include "reference/attention_impl.hpp"  // detail::accurate_sum

namespace numprobe::reference {

template <class Real>
attention_output decode_generic(const attention_case& c, std::span<const std::int64_t> lengths,
                                std::span<const double> q_rows, std::span<const std::int64_t> rows,
                                std::span<const double> k, std::span<const double> v) {
  using std::exp;
  using std::log;
  using std::tanh;
  c.validate();
  const std::int64_t T = c.t(), S = c.seq, D = c.head_dim, group = c.group();
  if (static_cast<std::int64_t>(lengths.size()) != c.batch)
    throw_input_error("reference::decode", "need one length per batch member");
  for (auto len : lengths)
    if (len < 0 || len > S) throw_input_error("reference::decode", "a length outside [0, S]");
  const auto kv_size = static_cast<std::size_t>(c.batch * S * c.kv_heads * D);
  if (k.size() != kv_size || v.size() != kv_size ||
      q_rows.size() != rows.size() * static_cast<std::size_t>(c.heads * D))
    throw_input_error("reference::decode", "tensor sizes do not match the case");
  attention_output out = make_poisoned_output({rows.begin(), rows.end()}, c.heads, D);
  const Real scale = Real(c.softmax_scale()), cap = Real(c.softcap);
  const auto n_items = static_cast<std::int64_t>(rows.size()) * c.heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t item = 0; item < n_items; ++item) {
    const std::int64_t i = item / c.heads, h = item % c.heads;
    const std::int64_t row = rows[static_cast<std::size_t>(i)];
    if (row < 0 || row >= c.rows()) continue;  // left NaN: caught by the caller's checks
    const std::int64_t b = row / T, t = row % T, g = h / group;
    const key_range keys = decode_visible_keys(c, lengths[static_cast<std::size_t>(b)], t);
    double* o = out.o.data() + (i * c.heads + h) * D;
    double& lse = out.lse[static_cast<std::size_t>(i * c.heads + h)];
    if (keys.size() == 0) {
      std::fill(o, o + D, 0.0);
      lse = -std::numeric_limits<double>::infinity();
      continue;
    }
    const double* q = q_rows.data() + (i * c.heads + h) * D;
    auto at = [&](std::int64_t j) { return ((b * S + j) * c.kv_heads + g) * D; };
    std::vector<Real> w(static_cast<std::size_t>(keys.size()));
    Real m = Real(0);
    for (std::int64_t j = keys.begin; j < keys.end; ++j) {
      detail::accurate_sum<Real> dot;
      for (std::int64_t d = 0; d < D; ++d) dot.add_product(Real(q[d]), Real(k[at(j) + d]));
      Real x = scale * dot.value();
      if (c.softcap > 0) x = cap * tanh(x / cap);
      w[static_cast<std::size_t>(j - keys.begin)] = x;
      if (j == keys.begin || x > m) m = x;
    }
    detail::accurate_sum<Real> mass;
    for (Real& x : w) {
      x = exp(x - m);
      mass.add(x);
    }
    const Real total = mass.value();
    for (std::int64_t d = 0; d < D; ++d) {
      detail::accurate_sum<Real> acc;
      for (std::int64_t j = keys.begin; j < keys.end; ++j)
        acc.add_product(w[static_cast<std::size_t>(j - keys.begin)], Real(v[at(j) + d]));
      o[d] = static_cast<double>(Real(acc.value() / total));
    }
    lse = static_cast<double>(Real(m + log(total)));
  }
  return out;
}

}  // namespace numprobe::reference
