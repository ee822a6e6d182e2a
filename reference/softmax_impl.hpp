#pragma once
// The templated softmax reference: the definition written out row by row in any real type.
// Instantiated for double in reference/softmax.cpp and for cpp_bin_float_50 by the tests that
// prove the double path's 1e-12 relative error. Math calls are found by ADL.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/reference/softmax.hpp"
#include "reference/attention_impl.hpp"  // detail::accurate_sum

namespace numprobe::reference {

template <class Real>
softmax_output softmax_generic(const softmax_case& c, std::span<const double> logits,
                               std::span<const std::int64_t> rows) {
  using std::exp;
  using std::log;
  using std::tanh;
  c.validate();
  const std::int64_t v = c.vocab;
  if (logits.size() != rows.size() * static_cast<std::size_t>(v))
    throw_input_error("reference::softmax", "logits are not [rows, vocab]");
  softmax_output out = make_poisoned_softmax({rows.begin(), rows.end()}, v);
  const Real cap = Real(c.softcap), temp = Real(c.temperature);
  const double inf = std::numeric_limits<double>::infinity();
  const auto n = static_cast<std::int64_t>(rows.size());

#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t r = 0; r < n; ++r) {
    const double* x = logits.data() + r * v;
    double* p = out.p.data() + r * v;
    double* logp = out.logp.data() + r * v;
    // z = softcap, then temperature; masked entries stay out of every sum.
    std::vector<Real> z(static_cast<std::size_t>(v));
    bool any = false;
    Real m = Real(0);
    for (std::int64_t i = 0; i < v; ++i) {
      if (std::isinf(x[i]) && x[i] < 0) continue;
      Real zi = Real(x[i]);
      if (c.softcap > 0) zi = cap * tanh(zi / cap);
      zi = zi / temp;
      z[static_cast<std::size_t>(i)] = zi;
      if (!any || zi > m) m = zi;
      any = true;
    }
    const std::int64_t target = softmax_target(c, rows[static_cast<std::size_t>(r)]);
    if (!any) {  // fully masked row: p = 0, log p = -inf, LSE = -inf, no target
      std::fill(p, p + v, 0.0);
      std::fill(logp, logp + v, -inf);
      out.lse[static_cast<std::size_t>(r)] = -inf;
      out.ce[static_cast<std::size_t>(r)] = 0.0;
      continue;
    }
    // Max-subtracted: every term is in (0, 1] and the max term is exactly 1, so the sum is
    // >= 1 and its log is safe, whatever the logits' magnitude.
    detail::accurate_sum<Real> mass;
    std::vector<Real> e(static_cast<std::size_t>(v), Real(0));
    for (std::int64_t i = 0; i < v; ++i) {
      if (std::isinf(x[i]) && x[i] < 0) continue;
      e[static_cast<std::size_t>(i)] = exp(z[static_cast<std::size_t>(i)] - m);
      mass.add(e[static_cast<std::size_t>(i)]);
    }
    const Real total = mass.value();
    const Real log_total = log(total);
    for (std::int64_t i = 0; i < v; ++i) {
      if (std::isinf(x[i]) && x[i] < 0) {
        p[i] = 0.0;
        logp[i] = -inf;
        continue;
      }
      p[i] = static_cast<double>(Real(e[static_cast<std::size_t>(i)] / total));
      // (z - m) - log(sum) rather than z - LSE: no cancellation of two large numbers.
      logp[i] = static_cast<double>(Real((z[static_cast<std::size_t>(i)] - m) - log_total));
    }
    out.lse[static_cast<std::size_t>(r)] = static_cast<double>(Real(m + log_total));
    out.ce[static_cast<std::size_t>(r)] =
        target < 0 ? 0.0
                   : static_cast<double>(Real(log_total - (z[static_cast<std::size_t>(target)] - m)));
  }
  return out;
}

}  // namespace numprobe::reference
