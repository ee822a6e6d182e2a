// A user's own kernel checked against numprobe's reference from their own GoogleTest, through
// the installed package: numprobe::reference (the double reference), numprobe::metrics (error
// metrics) and numprobe::formats (rounding to the kernel's dtype).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/metrics/attention_errors.hpp"
#include "numprobe/reference/attention.hpp"

namespace {

// "My kernel": float32 attention with one-pass online softmax, bottom-right causal, GQA.
std::vector<float> my_kernel(const numprobe::attention_case& c, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v,
                             std::vector<float>& lse) {
  const std::int64_t T = c.t(), S = c.seq, H = c.heads, D = c.head_dim, G = c.group();
  std::vector<float> o(static_cast<std::size_t>(T * H * D), 0.0f);
  lse.assign(static_cast<std::size_t>(T * H), 0.0f);
  const float scale = static_cast<float>(c.softmax_scale());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t kvh = h / G, last = S - T + t;
      float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
      std::vector<float> acc(static_cast<std::size_t>(D), 0.0f);
      for (std::int64_t j = 0; j <= last; ++j) {
        float s = 0.0f;
        for (std::int64_t d = 0; d < D; ++d)
          s += q[static_cast<std::size_t>((t * H + h) * D + d)] *
               k[static_cast<std::size_t>((j * c.kv_heads + kvh) * D + d)];
        s *= scale;
        const float m_new = std::max(m, s);
        const float alpha = std::exp(m - m_new), p = std::exp(s - m_new);
        l = l * alpha + p;
        for (std::int64_t d = 0; d < D; ++d)
          acc[static_cast<std::size_t>(d)] = acc[static_cast<std::size_t>(d)] * alpha +
                                             p * v[static_cast<std::size_t>((j * c.kv_heads + kvh) * D + d)];
        m = m_new;
      }
      for (std::int64_t d = 0; d < D; ++d)
        o[static_cast<std::size_t>((t * H + h) * D + d)] = acc[static_cast<std::size_t>(d)] / l;
      lse[static_cast<std::size_t>(t * H + h)] = m + std::log(l);
    }
  return o;
}

TEST(MyKernel, MatchesNumprobeReference) {
  numprobe::attention_case c;
  c.seq = 192;
  c.queries = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.dtype = numprobe::formats::format_id::m_bf16;
  c.mask = numprobe::mask_kind::m_causal;
  const numprobe::attention_inputs in(c, false);  // seeded, exactly representable in bf16
  const auto qd = in.q_all();
  // The kernel's inputs are bf16 values held in float: exact.
  for (double x : qd) ASSERT_EQ(numprobe::formats::round_to(c.dtype, x), x);
  const std::vector<float> q(qd.begin(), qd.end()), k(in.k().begin(), in.k().end()),
      v(in.v().begin(), in.v().end());
  std::vector<float> lse;
  const auto o = my_kernel(c, q, k, v, lse);

  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.t()));
  std::iota(rows.begin(), rows.end(), std::int64_t{0});
  const auto ref = numprobe::reference::attention(c, qd, rows, in.k(), in.v());
  auto cand = numprobe::make_poisoned_output(rows, c.heads, c.head_dim);
  cand.o.assign(o.begin(), o.end());
  cand.lse.assign(lse.begin(), lse.end());
  const auto e = numprobe::metrics::compare_attention(cand, ref, numprobe::formats::format_id::m_f32);
  EXPECT_EQ(e.nan_count, 0);
  // Basis: float32 sums over at most n = S + D = 224 terms: relative error below
  // gamma_n = n u / (1 - n u), u = 2^-24 (Higham), plus a few ulps for exp and the rescales.
  const double u = std::ldexp(1.0, -24), n = static_cast<double>(c.seq + c.head_dim);
  EXPECT_LE(e.rel_rms, n * u / (1 - n * u));
  EXPECT_LE(e.lse_max_abs, 8 * n * u);
}

}  // namespace
