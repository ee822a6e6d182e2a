// The double softmax reference and the same-precision naive baseline.
#include <cmath>
#include <limits>
#include <vector>

#include "reference/softmax_impl.hpp"

namespace numprobe::reference {

template softmax_output softmax_generic<double>(const softmax_case&, std::span<const double>,
                                                std::span<const std::int64_t>);

softmax_output softmax(const softmax_case& c, std::span<const double> logits,
                       std::span<const std::int64_t> rows) {
  return softmax_generic<double>(c, logits, rows);
}

namespace {

// A pairwise (tree) fp32 sum, as a framework's block reduction computes it.
float pairwise_sum_f32(const float* x, std::int64_t n) {
  if (n <= 8) {
    float s = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  const std::int64_t half = n / 2;
  return pairwise_sum_f32(x, half) + pairwise_sum_f32(x + half, n - half);
}

}  // namespace

softmax_output softmax_naive(const softmax_case& c, std::span<const double> logits,
                             std::span<const std::int64_t> rows) {
  c.validate();
  const std::int64_t v = c.vocab;
  if (logits.size() != rows.size() * static_cast<std::size_t>(v))
    throw_input_error("reference::softmax_naive", "logits are not [rows, vocab]");
  softmax_output out = make_poisoned_softmax({rows.begin(), rows.end()}, v);
  const float cap = static_cast<float>(c.softcap), temp = static_cast<float>(c.temperature);
  const float inf = std::numeric_limits<float>::infinity();
  const auto n = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t r = 0; r < n; ++r) {
    const double* x = logits.data() + r * v;
    std::vector<float> z(static_cast<std::size_t>(v)), e(static_cast<std::size_t>(v));
    float m = -inf;
    for (std::int64_t i = 0; i < v; ++i) {
      if (std::isinf(x[i]) && x[i] < 0) {  // masked
        z[static_cast<std::size_t>(i)] = -inf;
        continue;
      }
      float zi = static_cast<float>(formats::round_to(c.dtype, x[i]));  // the dtype, upcast
      if (c.softcap > 0) zi = cap * std::tanh(zi / cap);
      zi = zi / temp;
      z[static_cast<std::size_t>(i)] = zi;
      m = std::max(m, zi);
    }
    const std::int64_t target = softmax_target(c, rows[static_cast<std::size_t>(r)]);
    double* p = out.p.data() + r * v;
    double* logp = out.logp.data() + r * v;
    if (m == -inf) {  // torch gives NaN here; the baseline follows the defined semantics
      std::fill(p, p + v, 0.0);
      std::fill(logp, logp + v, -std::numeric_limits<double>::infinity());
      out.lse[static_cast<std::size_t>(r)] = -std::numeric_limits<double>::infinity();
      out.ce[static_cast<std::size_t>(r)] = 0.0;
      continue;
    }
    for (std::int64_t i = 0; i < v; ++i) e[static_cast<std::size_t>(i)] = std::exp(z[static_cast<std::size_t>(i)] - m);
    const float sum = pairwise_sum_f32(e.data(), v);
    const float log_sum = std::log(sum);
    for (std::int64_t i = 0; i < v; ++i) {
      p[i] = static_cast<double>(e[static_cast<std::size_t>(i)] / sum);
      logp[i] = static_cast<double>((z[static_cast<std::size_t>(i)] - m) - log_sum);
    }
    out.lse[static_cast<std::size_t>(r)] = static_cast<double>(m + log_sum);
    out.ce[static_cast<std::size_t>(r)] =
        target < 0 ? 0.0 : static_cast<double>(log_sum - (z[static_cast<std::size_t>(target)] - m));
  }
  return out;
}

}  // namespace numprobe::reference
