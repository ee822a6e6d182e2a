// The same-precision naive baseline (DESIGN.md, "a dimensionless bound"): attention as a
// framework computes it in the input dtype without tiling, three GEMM-shaped steps each
// accumulated in fp32 and rounded to the dtype once:
//   S = round(scale * Q K^T), scale applied in fp32 as a GEMM epilogue would;
//   P = round(softmax(S)) in fp32 (softcap, when on, applied in fp32 inside the softmax);
//   O = round(P V); LSE = max + log(sum) in fp32.
// The fp32 GEMMs are Eigen's, so the accumulation order is a blocked FMA order, as in a BLAS.
#include <Eigen/Dense>
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "numprobe/reference/attention.hpp"
#include "reference/attention_common.hpp"

namespace numprobe::reference {
namespace {

using row_matrix_f = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Scores held per block: rows x visible keys floats, at most 16 MiB per thread at 128K keys.
constexpr std::int64_t k_max_block_rows = 256;
constexpr std::int64_t k_score_budget = std::int64_t{1} << 22;

// bf16 is a float's top 16 bits: round to nearest even by adding 0x7FFF plus the lowest kept
// bit, then truncating (the same arithmetic as formats::round_float_to, whose result the tests
// compare against). Inline and branch-free so the per-logit and per-weight rounding loops
// vectorise; the scores are finite, so the NaN case cannot arise here.
inline float round_bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  return std::bit_cast<float>(u);
}

// Applies `round` to every element: one loop per rounding kind, so each is a tight loop.
template <class F>
void round_each(float* x, std::int64_t n, float factor, float divisor, F&& round) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = round(x[i] * factor / divisor);
}

void round_to_dtype(formats::format_id dtype, float* x, std::int64_t n, float factor, float divisor) {
  switch (dtype) {
    case formats::format_id::m_f32:
    case formats::format_id::m_f64:  // from float, rounding to f32 or f64 is the identity
      round_each(x, n, factor, divisor, [](float y) { return y; });
      return;
    case formats::format_id::m_bf16: round_each(x, n, factor, divisor, round_bf16); return;
    default:
      round_each(x, n, factor, divisor, [dtype](float y) { return formats::round_float_to(dtype, y); });
      return;
  }
}

struct naive_task {
  std::int64_t first = 0;  // range into the row order (one batch member)
  std::int64_t count = 0;
};

}  // namespace

attention_output attention_naive(const attention_case& c, std::span<const double> q_rows,
                                 std::span<const std::int64_t> rows, std::span<const double> k,
                                 std::span<const double> v) {
  detail::check_attention_args(c, q_rows, rows, k, v, "reference::attention_naive");
  attention_output out = make_poisoned_output(std::vector<std::int64_t>(rows.begin(), rows.end()),
                                              c.heads, c.head_dim);
  const std::int64_t group = c.group(), dims = c.head_dim, heads = c.heads;
  const std::int64_t n_queries = c.t(), n_keys = c.seq;
  const formats::format_id dtype = c.dtype;
  const auto scale = static_cast<float>(c.softmax_scale());
  const auto cap = static_cast<float>(c.softcap);
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();

  std::vector<std::int64_t> order(rows.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return rows[static_cast<std::size_t>(a)] < rows[static_cast<std::size_t>(b)];
  });
  const std::int64_t rows_per_block = std::clamp<std::int64_t>(
      k_score_budget / (group * n_keys), 1, std::max<std::int64_t>(1, k_max_block_rows / group));

  row_matrix_f k_head(n_keys, dims), v_head(n_keys, dims);
  for (std::size_t begin = 0; begin < order.size();) {
    const std::int64_t batch = rows[static_cast<std::size_t>(order[begin])] / n_queries;
    std::size_t end = begin;
    while (end < order.size() && rows[static_cast<std::size_t>(order[end])] / n_queries == batch)
      ++end;
    std::vector<naive_task> tasks;
    for (std::size_t first = begin; first < end; first += static_cast<std::size_t>(rows_per_block))
      tasks.push_back({static_cast<std::int64_t>(first),
                       std::min<std::int64_t>(rows_per_block, static_cast<std::int64_t>(end - first))});
    begin = end;

    for (std::int64_t g = 0; g < c.kv_heads; ++g) {
      // Inputs are already in the dtype, so these float copies are exact.
#pragma omp parallel for schedule(static)
      for (std::int64_t j = 0; j < n_keys; ++j)
        for (std::int64_t d = 0; d < dims; ++d) {
          const auto at = static_cast<std::size_t>(((batch * n_keys + j) * c.kv_heads + g) * dims + d);
          k_head(j, d) = static_cast<float>(k[at]);
          v_head(j, d) = static_cast<float>(v[at]);
        }

#pragma omp parallel
      {
        row_matrix_f q_blk, scores, o_blk;
        std::vector<key_range> keys;
#pragma omp for schedule(dynamic, 1)
        for (std::size_t ti = 0; ti < tasks.size(); ++ti) {
          const naive_task& task = tasks[ti];
          const std::int64_t m = task.count * group;
          q_blk.resize(m, dims);
          keys.resize(static_cast<std::size_t>(task.count));
          std::int64_t lo = n_keys, hi = 0;
          for (std::int64_t r = 0; r < task.count; ++r) {
            const auto idx = order[static_cast<std::size_t>(task.first + r)];
            const std::int64_t row = rows[static_cast<std::size_t>(idx)];
            const key_range kr = visible_keys(c, row / n_queries, row % n_queries);
            keys[static_cast<std::size_t>(r)] = kr;
            if (kr.size() > 0) {
              lo = std::min(lo, kr.begin);
              hi = std::max(hi, kr.end);
            }
            for (std::int64_t hh = 0; hh < group; ++hh)
              for (std::int64_t d = 0; d < dims; ++d)
                q_blk(r * group + hh, d) =
                    static_cast<float>(q_rows[static_cast<std::size_t>((idx * heads + g * group + hh) * dims + d)]);
          }
          const std::int64_t width = std::max<std::int64_t>(hi - lo, 0);
          scores.resize(m, width);
          if (width > 0) scores.noalias() = q_blk * k_head.middleRows(lo, width).transpose();

          std::vector<float> lse_f(static_cast<std::size_t>(m), minus_inf);
          for (std::int64_t row = 0; row < m; ++row) {
            const key_range& kr = keys[static_cast<std::size_t>(row / group)];
            float* x = scores.row(row).data();
            const std::int64_t s0 = kr.size() > 0 ? kr.begin - lo : 0;
            const std::int64_t s1 = kr.size() > 0 ? kr.end - lo : 0;
            std::fill(x, x + s0, 0.0f);
            std::fill(x + s1, x + width, 0.0f);
            if (s1 == s0) continue;  // fully masked: P = 0 gives O = 0; LSE stays -inf
            Eigen::Map<Eigen::ArrayXf> seg(x + s0, s1 - s0);
            round_to_dtype(dtype, seg.data(), seg.size(), scale, 1.0f);
            if (cap > 0) seg = cap * (seg / cap).tanh();
            const float row_max = seg.maxCoeff();
            seg = (seg - row_max).exp();
            const float mass = seg.sum();
            round_to_dtype(dtype, seg.data(), seg.size(), 1.0f, mass);
            lse_f[static_cast<std::size_t>(row)] = row_max + std::log(mass);
          }
          o_blk.resize(m, dims);
          if (width > 0) o_blk.noalias() = scores * v_head.middleRows(lo, width);
          else o_blk.setZero();

          for (std::int64_t r = 0; r < task.count; ++r) {
            const auto idx = order[static_cast<std::size_t>(task.first + r)];
            for (std::int64_t hh = 0; hh < group; ++hh) {
              const std::int64_t row = r * group + hh, h = g * group + hh;
              double* o = out.o.data() + (idx * heads + h) * dims;
              float* o_row = o_blk.row(row).data();
              round_to_dtype(dtype, o_row, dims, 1.0f, 1.0f);
              for (std::int64_t d = 0; d < dims; ++d) o[d] = static_cast<double>(o_row[d]);
              out.lse[static_cast<std::size_t>(idx * heads + h)] =
                  static_cast<double>(lse_f[static_cast<std::size_t>(row)]);
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace numprobe::reference
