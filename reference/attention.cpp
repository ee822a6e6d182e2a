// The production double reference. Same semantics as attention_generic, organised for speed:
// for each (batch, KV head), blocks of requested rows are taken for all query heads of the
// group at once, the logits come from an Eigen double GEMM, exp is vectorised, and O = P V is
// a second GEMM. Keys are processed in chunks with a max-subtracted online softmax so the
// score buffer stays small at 128K keys; each rescale costs one rounding, and O and l are
// rescaled by the same factor, so exp's own error in that factor cancels in O / l.
// P V is accumulated on V minus its mean over the head's keys, O = mean + P (V - mean) / l:
// the GEMM's running-sum error then scales with V's spread rather than its magnitude (V with
// a large common offset, the constant-V probe: there the result is exact).
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "numprobe/reference/attention.hpp"
#include "reference/attention_common.hpp"

namespace numprobe::reference {
namespace {

using row_matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using strided_map =
    Eigen::Map<const row_matrix, Eigen::Unaligned, Eigen::OuterStride<Eigen::Dynamic>>;

// Query rows (times heads of the group) per block: enough for the GEMMs to amortise packing
// K and V (packing cost / flops falls as 1 / rows).
constexpr std::int64_t k_block_rows = 256;
// Keys per chunk: the score buffer is k_block_rows x k_chunk_keys doubles (1 MiB).
constexpr std::int64_t k_chunk_keys = 512;

struct block_task {
  std::int64_t batch = 0;
  std::int64_t kv_head = 0;
  std::int64_t first = 0;  // range into the row order
  std::int64_t count = 0;
};

struct block_state {
  row_matrix q, scores, acc, v_centered;
  std::vector<double> row_max, mass;
  std::vector<key_range> keys;  // per block row (query heads of a row share it)
};

void run_block(const attention_case& c, std::span<const double> q_rows,
               std::span<const std::int64_t> rows, std::span<const double> k,
               std::span<const double> v, const std::vector<std::int64_t>& order,
               const std::vector<double>& v_means, const block_task& task, block_state& st,
               attention_output& out) {
  const std::int64_t group = c.group(), dims = c.head_dim, heads = c.heads;
  const std::int64_t n_queries = c.t();
  const std::int64_t m = task.count * group;
  const double scale = c.softmax_scale();
  const double cap = c.softcap;
  constexpr double minus_inf = -std::numeric_limits<double>::infinity();

  st.q.resize(m, dims);
  st.keys.resize(static_cast<std::size_t>(task.count));
  std::int64_t lo = c.seq, hi = 0;
  for (std::int64_t r = 0; r < task.count; ++r) {
    const auto idx = order[static_cast<std::size_t>(task.first + r)];
    const std::int64_t row = rows[static_cast<std::size_t>(idx)];
    const key_range kr = visible_keys(c, row / n_queries, row % n_queries);
    st.keys[static_cast<std::size_t>(r)] = kr;
    if (kr.size() > 0) {
      lo = std::min(lo, kr.begin);
      hi = std::max(hi, kr.end);
    }
    for (std::int64_t hh = 0; hh < group; ++hh) {
      const double* src = q_rows.data() + (idx * heads + task.kv_head * group + hh) * dims;
      std::copy(src, src + dims, st.q.row(r * group + hh).data());
    }
  }
  st.acc.setZero(m, dims);
  st.row_max.assign(static_cast<std::size_t>(m), minus_inf);
  st.mass.assign(static_cast<std::size_t>(m), 0.0);
  st.scores.resize(m, k_chunk_keys);
  st.v_centered.resize(k_chunk_keys, dims);
  const Eigen::Map<const Eigen::RowVectorXd> v_mean(
      v_means.data() + (task.batch * c.kv_heads + task.kv_head) * dims, dims);

  const std::int64_t kv_stride = c.kv_heads * dims;
  const std::int64_t kv_base = (task.batch * c.seq * c.kv_heads + task.kv_head) * dims;
  for (std::int64_t c0 = lo; c0 < hi; c0 += k_chunk_keys) {
    const std::int64_t c1 = std::min(c0 + k_chunk_keys, hi);
    const std::int64_t width = c1 - c0;
    // Only rows that see part of this chunk take part; rows in between that do not are
    // zeroed below, and a chunk no row sees is skipped.
    std::int64_t first = -1, last = -1;
    for (std::int64_t r = 0; r < task.count; ++r) {
      const key_range& kr = st.keys[static_cast<std::size_t>(r)];
      if (std::max(kr.begin, c0) < std::min(kr.end, c1)) {
        if (first < 0) first = r;
        last = r;
      }
    }
    if (first < 0) continue;
    const std::int64_t m0 = first * group, mn = (last - first + 1) * group;
    const strided_map k_chunk(k.data() + kv_base + c0 * kv_stride, width, dims,
                              Eigen::OuterStride<Eigen::Dynamic>(kv_stride));
    const strided_map v_chunk(v.data() + kv_base + c0 * kv_stride, width, dims,
                              Eigen::OuterStride<Eigen::Dynamic>(kv_stride));
    auto s = st.scores.block(m0, 0, mn, width);
    s.noalias() = st.q.middleRows(m0, mn) * k_chunk.transpose();

    for (std::int64_t r = first; r <= last; ++r) {
      const key_range& kr = st.keys[static_cast<std::size_t>(r)];
      const std::int64_t s0 = std::min(std::max(kr.begin, c0), c1) - c0;  // a range may start past the chunk
      const std::int64_t s1 = std::max(std::min(kr.end, c1) - c0, s0);
      for (std::int64_t hh = 0; hh < group; ++hh) {
        const std::int64_t row = r * group + hh;
        double* x = st.scores.row(row).data();
        std::fill(x, x + s0, 0.0);
        std::fill(x + s1, x + width, 0.0);
        if (s1 == s0) continue;
        Eigen::Map<Eigen::ArrayXd> seg(x + s0, s1 - s0);
        seg *= scale;
        if (cap > 0) seg = cap * (seg / cap).tanh();
        const double chunk_max = seg.maxCoeff();
        double& run_max = st.row_max[static_cast<std::size_t>(row)];
        double& run_mass = st.mass[static_cast<std::size_t>(row)];
        if (chunk_max > run_max) {
          if (run_max != minus_inf) {
            const double alpha = std::exp(run_max - chunk_max);
            run_mass *= alpha;
            st.acc.row(row) *= alpha;
          }
          run_max = chunk_max;
        }
        seg = (seg - run_max).exp();
        run_mass += detail::pairwise_sum(seg.data(), seg.size());
      }
    }
    auto vc = st.v_centered.topRows(width);
    vc = v_chunk.rowwise() - v_mean;
    st.acc.middleRows(m0, mn).noalias() += s * vc;
  }

  for (std::int64_t r = 0; r < task.count; ++r) {
    const auto idx = order[static_cast<std::size_t>(task.first + r)];
    for (std::int64_t hh = 0; hh < group; ++hh) {
      const std::int64_t row = r * group + hh;
      const std::int64_t h = task.kv_head * group + hh;
      double* o = out.o.data() + (idx * heads + h) * dims;
      double& lse = out.lse[static_cast<std::size_t>(idx * heads + h)];
      const double run_mass = st.mass[static_cast<std::size_t>(row)];
      if (run_mass == 0.0) {  // fully masked row: defined as O = 0, LSE = -inf
        std::fill(o, o + dims, 0.0);
        lse = minus_inf;
        continue;
      }
      for (std::int64_t d = 0; d < dims; ++d) o[d] = v_mean[d] + st.acc(row, d) / run_mass;
      lse = st.row_max[static_cast<std::size_t>(row)] + std::log(run_mass);
    }
  }
}

}  // namespace

attention_output attention(const attention_case& c, std::span<const double> q_rows,
                           std::span<const std::int64_t> rows, std::span<const double> k,
                           std::span<const double> v) {
  detail::check_attention_args(c, q_rows, rows, k, v, "reference::attention");
  attention_output out = make_poisoned_output(std::vector<std::int64_t>(rows.begin(), rows.end()),
                                              c.heads, c.head_dim);
  // Sorted by flat row, so a block holds neighbouring rows of one batch member, whose key
  // ranges (causal, window) overlap the most.
  std::vector<std::int64_t> order(rows.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return rows[static_cast<std::size_t>(a)] < rows[static_cast<std::size_t>(b)];
  });
  const std::int64_t rows_per_block = std::max<std::int64_t>(1, k_block_rows / c.group());
  std::vector<block_task> tasks;
  for (std::size_t begin = 0; begin < order.size();) {
    const std::int64_t batch = rows[static_cast<std::size_t>(order[begin])] / c.t();
    std::size_t end = begin;
    while (end < order.size() && rows[static_cast<std::size_t>(order[end])] / c.t() == batch) ++end;
    for (std::int64_t g = 0; g < c.kv_heads; ++g)
      for (std::size_t first = begin; first < end; first += static_cast<std::size_t>(rows_per_block))
        tasks.push_back({batch, g, static_cast<std::int64_t>(first),
                         std::min<std::int64_t>(rows_per_block, static_cast<std::int64_t>(end - first))});
    begin = end;
  }

  // Mean of V over each (batch, KV head)'s keys; any value would be exact algebra, the mean
  // makes the centred values smallest.
  std::vector<double> v_means(static_cast<std::size_t>(c.batch * c.kv_heads * c.head_dim), 0.0);
  const std::int64_t kv_stride = c.kv_heads * c.head_dim;
#pragma omp parallel for schedule(static)
  for (std::int64_t bg = 0; bg < c.batch * c.kv_heads; ++bg) {
    const std::int64_t b = bg / c.kv_heads, g = bg % c.kv_heads;
    // A plain loop in key order: Eigen's colwise sum over a map chooses its vectorised order
    // from the data's address, so the mean's last bits (and O's, on 53-bit inputs) would
    // depend on where the allocator put V.
    const double* base = v.data() + (b * c.seq * c.kv_heads + g) * c.head_dim;
    double* mean = v_means.data() + bg * c.head_dim;
    for (std::int64_t j = 0; j < c.seq; ++j)
      for (std::int64_t d = 0; d < c.head_dim; ++d) mean[d] += base[j * kv_stride + d];
    for (std::int64_t d = 0; d < c.head_dim; ++d) mean[d] /= static_cast<double>(c.seq);
  }

#pragma omp parallel
  {
    block_state st;  // per-thread buffers, reused across blocks
#pragma omp for schedule(dynamic, 1)
    for (std::size_t i = 0; i < tasks.size(); ++i)
      run_block(c, q_rows, rows, k, v, order, v_means, tasks[i], st, out);
  }
  return out;
}

}  // namespace numprobe::reference
