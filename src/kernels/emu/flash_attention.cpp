// The emulated FlashAttention-2 forward kernel (see flash_attention.hpp).
//
// Work layout: rows are independent in FA2's forward pass, and a row's result depends on the
// other rows only through the key tiles its CTA (query tile) walks. So each requested row keeps
// its CTA's tile span, and the (row, query head) pairs that read one KV head are batched into
// chunks that walk the key tiles together: per key tile, one GEMM for S = Q.K^T and one for P.V
// over the chunk, with each row's online-softmax step in between. The numerics per row are those
// of the kernel; the batching only makes the emulation cost O(rows x S x D) at GEMM speed.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numbers>
#include <type_traits>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "src/kernels/emu/flash_attention.hpp"
#include "src/kernels/emu/flash_mask.hpp"
#include "src/kernels/emu/kv_scales.hpp"
#include "src/kernels/emu/state_rounder.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace numprobe::emu {
namespace {

using formats::format_id;

template <class T>
using row_matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Whether values already in format `held` need rounding to be stored in `state`.
bool needs_rounding(format_id state, format_id held) {
  if (state == held || state == format_id::m_f64) return false;
  // Every other format is exactly representable in fp32 (fp32 covers their exponent ranges
  // and mantissas, including e8m0's 2^-127 as a subnormal).
  if (state == format_id::m_f32) return held == format_id::m_f64;
  return true;
}

// The states as the kernel holds them once faults that pin a state's dtype are applied.
state_dtypes effective_states(const flash_config& cfg) {
  state_dtypes st = cfg.states;
  // An explicit f64 state (precision bisection, `numprobe bisect`) overrides the dtype a fault
  // pins: it asks whether holding that state in f64 removes the error.
  if (cfg.has(fault::m_rowsum_bf16) && st.l != format_id::m_f64) st.l = format_id::m_bf16;
  if (cfg.has(fault::m_acc_bf16) && st.o != format_id::m_f64) st.o = format_id::m_bf16;
  return st;
}

// max over n values (-inf when n == 0). Max is exact, so the order is free: eight partial
// maxima keep it in vector registers (a single running max was spilled by the compiler).
template <class A>
A row_maximum(const A* x, std::int64_t n) {
  constexpr int lanes = 8;
  A part[lanes];
  for (A& v : part) v = -std::numeric_limits<A>::infinity();
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int k = 0; k < lanes; ++k) part[k] = x[i + k] > part[k] ? x[i + k] : part[k];
  for (; i < n; ++i) part[0] = x[i] > part[0] ? x[i] : part[0];
  A m = part[0];
  for (int k = 1; k < lanes; ++k) m = part[k] > m ? part[k] : m;
  return m;
}

// One (row, query head) pair: a query vector of the batched walk.
struct query_vec {
  std::size_t row_index;  // position in the requested rows
  std::int64_t head;
  key_range keys;         // visible keys (kernel mask)
  tile_span tiles;        // key tiles its CTA walks
};

struct chunk_task {
  std::int64_t batch;
  std::int64_t kv_head;
  std::size_t begin, end;  // range in the query_vec list
};

template <class A, class GS, class GO>
class flash_runner {
 public:
  flash_runner(const attention_inputs& in, const flash_config& cfg, std::span<const std::int64_t> rows)
      : m_in(in), m_c(in.c()), m_cfg(cfg), m_rows(rows), m_st(effective_states(cfg)),
        m_round_s(m_st.s), m_round_p(m_st.p), m_round_m(m_st.m), m_round_l(m_st.l),
        m_round_o(m_st.o) {}

  attention_output run() {
    const std::int64_t hq = m_c.heads, d = m_c.head_dim;
    attention_output out = make_poisoned_output({m_rows.begin(), m_rows.end()}, hq, d);
    if (m_rows.empty()) return out;
    m_q = m_in.q_rows(m_rows);  // validates the rows; throws an input error naming "rows"
    if (needs_rounding(m_st.q, m_c.dtype))
      for (double& x : m_q) x = formats::round_to(m_st.q, x);
    if (m_cfg.fp8.kv && m_c.ragged())
      throw_unsupported("--kv-format", "fp8 KV scales of a ragged batch (its padding would enter the amax)");
    check_acc_model();
    build_work();
    if (m_cfg.fp8.kv) {
      m_k_amax = amax_by_layout(m_in.k());
      m_v_amax = amax_by_layout(m_in.v());
    }

    // One (batch, KV head) at a time: its K and V are converted to the kernel's storage once
    // and shared by every chunk that reads them (converting per chunk and tile made the
    // emulation memory-bound at long lengths).
    for (std::size_t first = 0; first < m_tasks.size();) {
      std::size_t last = first;
      while (last < m_tasks.size() && m_tasks[last].batch == m_tasks[first].batch &&
             m_tasks[last].kv_head == m_tasks[first].kv_head)
        ++last;
      load_kv(m_tasks[first].batch, m_tasks[first].kv_head);
      const auto n = static_cast<std::int64_t>(last - first);
#pragma omp parallel for schedule(dynamic, 1)
      for (std::int64_t i = 0; i < n; ++i) run_chunk(m_tasks[first + static_cast<std::size_t>(i)], out);
      first = last;
    }
    return out;
  }

 private:
  using F = std::conditional_t<std::is_same_v<A, double> || std::is_same_v<GO, double>, double, float>;

  void build_work() {
    const std::int64_t t_len = m_c.t(), group = m_c.group();
    kernel_mask mask(m_c, m_cfg.has(fault::m_mask_top_left));
    std::vector<std::size_t> order(m_rows.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return m_rows[a] < m_rows[b]; });

    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    // Chunks large enough for efficient GEMMs, small enough to give every thread work.
    const auto total = static_cast<std::int64_t>(m_rows.size()) * m_c.heads;
    const std::size_t chunk = static_cast<std::size_t>(
        std::clamp<std::int64_t>(total / (4 * threads), 8, 128));

    for (std::int64_t b = 0; b < m_c.batch; ++b) {
      // A ragged batch: the member's own keys (its slots past them are never visible).
      mask.keys = m_c.keys_of(b);
      for (std::int64_t g = 0; g < m_c.kv_heads; ++g) {
        const std::size_t first = m_vecs.size();
        for (std::size_t idx : order) {
          const std::int64_t r = m_rows[idx];
          if (r / t_len != b) continue;
          const std::int64_t t = r % t_len;
          const key_range keys = mask.row(t);
          const tile_span tiles = cta_key_tiles(mask, t / m_cfg.tile_q, m_cfg.tile_q, m_cfg.tile_k,
                                                m_cfg.has(fault::m_drop_tail_tile));
          // Query heads reading KV head g, in head order (gqa-mod: h % Hkv == g).
          for (std::int64_t h = 0; h < m_c.heads; ++h)
            if (kv_head_of(h, group) == g) m_vecs.push_back({idx, h, keys, tiles});
        }
        for (std::size_t s = first; s < m_vecs.size(); s += chunk)
          m_tasks.push_back({b, g, s, std::min(m_vecs.size(), s + chunk)});
      }
    }
  }

  // The KV head query head h reads: h / group, or h % Hkv under gqa-mod.
  [[nodiscard]] std::int64_t kv_head_of(std::int64_t h, std::int64_t group) const {
    return m_cfg.has(fault::m_gqa_mod) ? h % m_c.kv_heads : h / group;
  }

  // fp8 KV: the scale group of an element and the amax of each (src/kernels/emu/kv_scales.hpp,
  // the rule the kvcache study shares).
  [[nodiscard]] kv_shape kv_layout() const { return {m_c.batch, m_c.seq, m_c.kv_heads, m_c.head_dim}; }
  [[nodiscard]] std::int64_t scale_index(std::int64_t b, std::int64_t pos, std::int64_t g, std::int64_t d) const {
    return kv_scale_index(m_cfg.fp8.kv_scale, kv_layout(), b, pos, g, d);
  }
  [[nodiscard]] std::vector<double> amax_by_layout(std::span<const double> x) const {
    return kv_amax(m_cfg.fp8.kv_scale, kv_layout(), x);
  }
  // One element through the fp8 cache: quantized against its fp32 scale s = amax / max, then
  // dequantized by the kernel (kv-scale-ignored: codes read as if s were 1).
  [[nodiscard]] double through_fp8_cache(double x, double amax) const {
    const double s = kv_scale(m_cfg.fp8.kv_format, amax);
    const double code = kv_code(m_cfg.fp8.kv_format, x, s);
    return m_cfg.has(fault::m_kv_scale_ignored) ? code : code * s;
  }

  // --acc-model: the operands the model reads must be what the kernel feeds its MMA
  // (flash_attention.hpp, fp8_config).
  void check_acc_model() const {
    const mma_model* mm = m_cfg.fp8.acc_model;
    if (mm == nullptr) return;
    const std::string place = "--acc-model";
    const std::string_view in = formats::name(mm->input);
    if (mm->integer())
      throw_input_error(place, fmt::format("{} is an integer (s8) MMA; attention's P.V runs on fp8 or 16-bit operands",
                                           mm->name));
    if (mm->output != format_id::m_f32)
      throw_input_error(place, fmt::format("{} accumulates in {}; the attention emulator models fp32 accumulators",
                                           mm->name, formats::name(mm->output)));
    if (m_cfg.has(fault::m_chunk_rescale))
      throw_input_error("--inject", fmt::format("chunk-rescale is not modelled together with --acc-model {}", mm->name));
    if (is_fp8(mm->input)) {
      if (!m_cfg.fp8.p || m_cfg.fp8.p_format != mm->input)
        throw_input_error(place, fmt::format("{} reads {} operands: P must be {} (--p-format {})", mm->name, in, in, in));
      if (!m_cfg.fp8.kv || m_cfg.fp8.kv_format != mm->input)
        throw_input_error(place, fmt::format("{} reads {} operands: V must be {} (--kv-format {})", mm->name, in, in, in));
      if (m_cfg.fp8.kv_scale == kv_scale_layout::m_token)
        throw_input_error(place, fmt::format("{}: per-token V scales vary along the keys, so the kernel cannot apply "
                                             "them after the MMA (use --kv-scale tensor, head or channel)",
                                             mm->name));
    } else if (m_cfg.fp8.p || m_cfg.fp8.kv) {
      throw_input_error(place, fmt::format("{} reads {} operands, not fp8 ones (--p-format/--kv-format need an fp8 "
                                           "model such as h200-wgmma-e4m3)",
                                           mm->name, in));
    }
  }
  [[nodiscard]] static bool is_fp8(format_id f) { return f == format_id::m_e4m3fn || f == format_id::m_e5m2; }

  // K and V of one (batch, KV head) as [S, D] matrices in the kernel's storage dtypes.
  void load_kv(std::int64_t batch, std::int64_t kv_head) {
    const std::int64_t s_len = m_c.seq, dim = m_c.head_dim, kv_stride = m_c.kv_heads * dim;
    const bool round_k = needs_rounding(m_st.k, m_c.dtype);
    const bool round_v = needs_rounding(m_st.v, m_c.dtype);
    m_k.resize(s_len, dim);
    m_v.resize(s_len, dim);
    const mma_model* mm = m_cfg.fp8.acc_model;
    m_v_op.assign(mm != nullptr ? static_cast<std::size_t>(s_len * dim) : 0, 0.0);
    const double* k_base = m_in.k().data() + (batch * s_len * m_c.kv_heads + kv_head) * dim;
    const double* v_base = m_in.v().data() + (batch * s_len * m_c.kv_heads + kv_head) * dim;
    const bool wrap = m_cfg.has(fault::m_index_wrap);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < s_len; ++r) {
      // index-wrap: key r is read from row r mod 2^15 (flash_attention.hpp); the mask keeps r.
      const std::int64_t src = wrap ? r % k_index_wrap_rows : r;
      const double* ks = k_base + src * kv_stride;
      const double* vs = v_base + src * kv_stride;
      GS* kd = m_k.row(r).data();
      GO* vd = m_v.row(r).data();
      if (m_cfg.fp8.kv) {
        for (std::int64_t e = 0; e < dim; ++e) {
          kd[e] = static_cast<GS>(through_fp8_cache(ks[e], m_k_amax[static_cast<std::size_t>(scale_index(batch, src, kv_head, e))]));
          vd[e] = static_cast<GO>(through_fp8_cache(vs[e], m_v_amax[static_cast<std::size_t>(scale_index(batch, src, kv_head, e))]));
        }
        if (mm != nullptr)  // the MMA reads V's codes; the scale is applied in the epilogue
          for (std::int64_t e = 0; e < dim; ++e)
            m_v_op[static_cast<std::size_t>(r * dim + e)] = kv_code(
                m_cfg.fp8.kv_format, vs[e],
                kv_scale(m_cfg.fp8.kv_format, m_v_amax[static_cast<std::size_t>(scale_index(batch, src, kv_head, e))]));
        continue;
      }
      if (round_k) {
        for (std::int64_t e = 0; e < dim; ++e) kd[e] = static_cast<GS>(formats::round_to(m_st.k, ks[e]));
      } else {
        for (std::int64_t e = 0; e < dim; ++e) kd[e] = static_cast<GS>(ks[e]);
      }
      if (round_v) {
        for (std::int64_t e = 0; e < dim; ++e) vd[e] = static_cast<GO>(formats::round_to(m_st.v, vs[e]));
      } else {
        for (std::int64_t e = 0; e < dim; ++e) vd[e] = static_cast<GO>(vs[e]);
      }
      if (mm != nullptr)
        for (std::int64_t e = 0; e < dim; ++e) m_v_op[static_cast<std::size_t>(r * dim + e)] = static_cast<double>(vd[e]);
    }
    if (mm == nullptr) return;
    // V's scale per channel, applied after the MMA (1 for 16-bit operands and kv-scale-ignored).
    m_v_col_scale.assign(static_cast<std::size_t>(dim), 1.0f);
    if (m_cfg.fp8.kv && !m_cfg.has(fault::m_kv_scale_ignored))
      for (std::int64_t e = 0; e < dim; ++e)
        m_v_col_scale[static_cast<std::size_t>(e)] = static_cast<float>(
            kv_scale(m_cfg.fp8.kv_format, m_v_amax[static_cast<std::size_t>(scale_index(batch, 0, kv_head, e))]));
    if (!is_fp8(mm->input))
      for (std::size_t i = 0; i < m_v_op.size(); ++i)
        if (!mma_representable(mm->input, m_v_op[i]))
          throw_input_error("--acc-model", fmt::format("{} reads {} operands, but V holds {} (key {}, channel {}), "
                                                       "not a {} value: store V as {} (--state v={})",
                                                       mm->name, formats::name(mm->input), m_v_op[i],
                                                       static_cast<std::int64_t>(i) / dim, static_cast<std::int64_t>(i) % dim,
                                                       formats::name(mm->input), formats::name(mm->input),
                                                       formats::name(mm->input)));
  }

  // The exp the kernel uses: exp2 with a log2(e) prescale held in the s dtype, or exp.
  [[nodiscard]] A exp_fn(A x) const {
    if (m_cfg.exp2) return std::exp2(x * m_log2e);
    return std::exp(x);
  }

  void run_chunk(const chunk_task& task, attention_output& out) const {
    // The member's own keys (a ragged batch: seq_lens; its slots past them are never walked).
    const std::int64_t dim = m_c.head_dim, bk = m_cfg.tile_k, s_len = m_c.keys_of(task.batch);
    const auto nq = static_cast<std::int64_t>(task.end - task.begin);
    const query_vec* vecs = m_vecs.data() + task.begin;
    const bool guard = !m_cfg.has(fault::m_no_empty_guard);
    const bool skip_rescale = m_cfg.has(fault::m_skip_rescale) && !m_cfg.force_rescale;
    const bool stale_max = m_cfg.has(fault::m_stale_max) && !m_cfg.force_rescale;
    const A inf = std::numeric_limits<A>::infinity();
    const A m_init = m_cfg.has(fault::m_finite_sentinel) ? A(kernels::k_finite_sentinel) : -inf;
    const A scale = static_cast<A>(m_c.softmax_scale());
    const A cap = static_cast<A>(m_c.softcap);
    // wave-width: only columns held by lanes [0, red_w) of the wavefront reach m and l.
    const std::int64_t wave_w = m_cfg.wavefront_width, red_w = m_cfg.reduction_width();
    const bool lane_split = red_w < wave_w && bk > red_w;
    const auto reaches_state = [&](std::int64_t c) { return c % wave_w < red_w; };

    row_matrix<GS> q(nq, dim), s(nq, bk);
    row_matrix<GO> p(nq, bk), pv(nq, dim), o(nq, dim);
    o.setZero();
    const mma_model* mm = m_cfg.fp8.acc_model;
    // acc_trunc: the accumulator modelled by its fraction bits only (no --acc-model).
    const bool acc_trunc = m_cfg.fp8.acc_promote > 0 && mm == nullptr;
    const bool two_level = m_cfg.fp8.acc_promote > 0;
    const bool no_promotion = m_cfg.has(fault::m_acc_no_promotion);
    row_matrix<GO> o_acc(two_level ? nq : 0, two_level ? dim : 0);
    row_matrix<double> p_op(mm != nullptr ? nq : 0, mm != nullptr ? bk : 0);  // what the MMA reads as P
    o_acc.setZero();
    std::vector<std::int64_t> since_promote(static_cast<std::size_t>(nq), 0);
    std::vector<A> m(static_cast<std::size_t>(nq), m_init), m_prev(m.size(), m_init);
    std::vector<A> l(m.size(), A(0)), alpha(m.size(), A(1)), x(static_cast<std::size_t>(bk));
    std::vector<std::int64_t> seen(m.size(), 0);
    std::vector<char> active(m.size(), 0);

    std::int64_t tile_first = std::numeric_limits<std::int64_t>::max(), tile_last = 0;
    for (std::int64_t v = 0; v < nq; ++v) {
      const query_vec& qv = vecs[v];
      const double* src = m_q.data() + (qv.row_index * static_cast<std::size_t>(m_c.heads) +
                                         static_cast<std::size_t>(qv.head)) * static_cast<std::size_t>(dim);
      for (std::int64_t e = 0; e < dim; ++e) q(v, e) = static_cast<GS>(src[e]);
      if (qv.tiles.last > qv.tiles.first) {
        tile_first = std::min(tile_first, qv.tiles.first);
        tile_last = std::max(tile_last, qv.tiles.last);
      }
    }


    // The order the key tiles are walked in. Online softmax is exact in any order, so a
    // different order changes rounding only: atomic-order draws it per call (each tile sorted by
    // a hash of the call's seed and its index, so every subset of tiles keeps one relative
    // order), decode-path reverses it for T = 1 calls (a decode kernel with its own order).
    std::vector<std::int64_t> tile_order;
    for (std::int64_t j = tile_first; j < tile_last; ++j) tile_order.push_back(j);
    if (m_cfg.has(fault::m_atomic_order))
      std::sort(tile_order.begin(), tile_order.end(), [&](std::int64_t a, std::int64_t b) {
        return counter_hash(m_cfg.call_seed, 30, static_cast<std::uint64_t>(a)) <
               counter_hash(m_cfg.call_seed, 30, static_cast<std::uint64_t>(b));
      });
    else if (m_cfg.has(fault::m_decode_path) && m_c.t() == 1)
      std::reverse(tile_order.begin(), tile_order.end());
    // chunk-rescale: a chunked prefill (1 < T < S) restarts its running state at the key tile
    // holding the chunk's first key, and merges the two parts by their maxima at the end.
    const std::int64_t chunk_tile = m_cfg.has(fault::m_chunk_rescale) && m_c.t() > 1 && m_c.t() < s_len
                                        ? (s_len - m_c.t()) / bk
                                        : -1;
    std::vector<A> m1, l1;
    row_matrix<GO> o1(chunk_tile >= 0 ? nq : 0, chunk_tile >= 0 ? dim : 0);

    for (const std::int64_t j : tile_order) {
      if (j == chunk_tile && j > tile_first) {
        m1 = m;
        l1 = l;
        o1 = o;
        std::fill(m.begin(), m.end(), m_init);
        std::fill(m_prev.begin(), m_prev.end(), m_init);
        std::fill(l.begin(), l.end(), A(0));
        std::fill(seen.begin(), seen.end(), 0);
        o.setZero();
      }
      // Query vectors whose CTA walks this tile; chunks are sorted by row, so for monotone masks
      // they form one run and the GEMMs cover [a0, a1) with few idle rows.
      std::int64_t a0 = nq, a1 = 0;
      for (std::int64_t v = 0; v < nq; ++v) {
        active[static_cast<std::size_t>(v)] = vecs[v].tiles.first <= j && j < vecs[v].tiles.last;
        if (active[static_cast<std::size_t>(v)]) {
          a0 = std::min(a0, v);
          a1 = v + 1;
        }
      }
      if (a0 >= a1) continue;
      const std::int64_t k0 = j * bk, nk = std::min(bk, s_len - k0), na = a1 - a0;

      s.block(a0, 0, na, nk).noalias() = q.middleRows(a0, na) * m_k.middleRows(k0, nk).transpose();

      for (std::int64_t v = a0; v < a1; ++v) {
        const auto vi = static_cast<std::size_t>(v);
        if (!active[vi]) {
          p.row(v).head(nk).setZero();
          continue;
        }
        // Scores in the s dtype, softcap, then the kernel's mask.
        for (std::int64_t c = 0; c < nk; ++c) x[static_cast<std::size_t>(c)] = m_round_s(scale * static_cast<A>(s(v, c)));
        if (cap > A(0))
          for (std::int64_t c = 0; c < nk; ++c)
            x[static_cast<std::size_t>(c)] = m_round_s(cap * std::tanh(x[static_cast<std::size_t>(c)] / cap));
        const std::int64_t vlo = std::clamp(vecs[v].keys.begin - k0, std::int64_t{0}, nk);
        const std::int64_t vhi = std::max(vlo, std::clamp(vecs[v].keys.end - k0, std::int64_t{0}, nk));
        for (std::int64_t c = 0; c < vlo; ++c) x[static_cast<std::size_t>(c)] = -inf;
        for (std::int64_t c = vhi; c < nk; ++c) x[static_cast<std::size_t>(c)] = -inf;
        A row_max = -inf;
        if (lane_split) {
          for (std::int64_t c = vlo; c < vhi; ++c)
            if (reaches_state(c)) row_max = std::max(row_max, x[static_cast<std::size_t>(c)]);
        } else {
          row_max = row_maximum(x.data() + vlo, vhi - vlo);
        }

        // Online softmax step. The empty-row guard: a row that has seen no valid key keeps
        // m = -inf, and exp is taken against 0 instead, so exp(-inf - -inf) never happens.
        const A m_old = m[vi];
        const A m_new = m_round_m(std::max(m_old, row_max));
        const A m_use = (guard && m_new == -inf) ? A(0) : m_new;
        A m_ref = m_old;
        // stale-max: the rescale reads the max register written one tile earlier; while that
        // register still holds its initial value the current one is used.
        if (stale_max && seen[vi] >= 2 && m_prev[vi] != m_init) m_ref = m_prev[vi];
        const A a = skip_rescale ? A(1) : exp_fn(m_ref - m_use);
        for (std::int64_t c = 0; c < nk; ++c) {
          const A pc = m_round_p(exp_fn(x[static_cast<std::size_t>(c)] - m_use));
          x[static_cast<std::size_t>(c)] = pc;
          p(v, c) = static_cast<GO>(pc);
          // fp8 P: quantized (after its pre-scale) for P.V only; l keeps the unquantized P, so
          // flushed mass leaves the numerator alone and the LSE still looks exact.
          if (m_cfg.fp8.p) {
            const double code = formats::round_to(m_cfg.fp8.p_format, static_cast<double>(pc) * m_p_scale,
                                                  formats::rounding::m_nearest_even, formats::overflow::m_saturate);
            p(v, c) = static_cast<GO>(code / m_p_scale);
            if (mm != nullptr) p_op(v, c) = code;
          } else if (mm != nullptr) {
            p_op(v, c) = formats::round_to(mm->input, static_cast<double>(pc));
          }
        }
        // The running sum accumulates element by element in the l dtype, as each thread's
        // register does: a bf16 sum of increments near 1 stalls at 256.
        A lv = m_round_l(a * l[vi]);
        for (std::int64_t c = 0; c < nk; ++c)
          if (!lane_split || reaches_state(c)) lv = m_round_l(lv + x[static_cast<std::size_t>(c)]);
        l[vi] = lv;
        alpha[vi] = a;
        m_prev[vi] = m_old;
        m[vi] = m_new;
        ++seen[vi];
      }

      if (mm != nullptr) {
        for (std::int64_t v = a0; v < a1; ++v)
          if (active[static_cast<std::size_t>(v)])
            model_tile(v, nk, k0, static_cast<float>(alpha[static_cast<std::size_t>(v)]), p_op, o, o_acc,
                       since_promote[static_cast<std::size_t>(v)], no_promotion);
        continue;
      }
      pv.middleRows(a0, na).noalias() = p.block(a0, 0, na, nk) * m_v.middleRows(k0, nk);
      for (std::int64_t v = a0; v < a1; ++v) {
        if (!active[static_cast<std::size_t>(v)]) continue;
        const GO a = static_cast<GO>(alpha[static_cast<std::size_t>(v)]);
        if (acc_trunc) {
          // fp8 MMA accumulator: limited mantissa per tile, promoted into fp32 every N tiles.
          const int bits = m_cfg.fp8.acc_mantissa;
          for (std::int64_t e = 0; e < dim; ++e) {
            o_acc(v, e) = a * o_acc(v, e);
            o(v, e) = static_cast<GO>(truncate_mantissa(truncate_mantissa(double(a * o(v, e)), bits) + double(pv(v, e)), bits));
          }
          if (++since_promote[static_cast<std::size_t>(v)] == m_cfg.fp8.acc_promote && !no_promotion) {
            for (std::int64_t e = 0; e < dim; ++e) {
              o_acc(v, e) += o(v, e);
              o(v, e) = GO(0);
            }
            since_promote[static_cast<std::size_t>(v)] = 0;
          }
          continue;
        }
        if (m_round_o.identity) {
          for (std::int64_t e = 0; e < dim; ++e) o(v, e) = a * o(v, e) + pv(v, e);
        } else {
          for (std::int64_t e = 0; e < dim; ++e) o(v, e) = m_round_o(m_round_o(a * o(v, e)) + pv(v, e));
        }
      }
    }

    if (!m1.empty()) {  // chunk-rescale: merge the part before the chunk and the chunk's part
      for (std::int64_t v = 0; v < nq; ++v) {
        const auto vi = static_cast<std::size_t>(v);
        const A mx = std::max(m1[vi], m[vi]);
        if (mx == -inf) continue;
        const A a1 = m1[vi] == -inf ? A(0) : exp_fn(m1[vi] - mx), a2 = m[vi] == -inf ? A(0) : exp_fn(m[vi] - mx);
        l[vi] = m_round_l(m_round_l(a1 * l1[vi]) + m_round_l(a2 * l[vi]));
        for (std::int64_t e = 0; e < dim; ++e)
          o(v, e) = m_round_o(m_round_o(static_cast<GO>(a1) * o1(v, e)) + m_round_o(static_cast<GO>(a2) * o(v, e)));
        m[vi] = mx;
      }
    }

    // Epilogue: O / l in the output dtype, LSE = m + log(l) in the lse dtype.
    const state_rounder<F> round_out(m_st.out), round_lse(m_st.lse);
    for (std::int64_t v = 0; v < nq; ++v) {
      const auto vi = static_cast<std::size_t>(v);
      const query_vec& qv = vecs[v];
      double* dst = out.o.data() + (qv.row_index * static_cast<std::size_t>(m_c.heads) +
                                    static_cast<std::size_t>(qv.head)) * static_cast<std::size_t>(dim);
      double& lse = out.lse[qv.row_index * static_cast<std::size_t>(m_c.heads) + static_cast<std::size_t>(qv.head)];
      const F lf = static_cast<F>(l[vi]);
      if (guard && lf == F(0)) {  // no key contributed: the defined O = 0, LSE = -inf
        std::fill(dst, dst + dim, 0.0);
        lse = -std::numeric_limits<double>::infinity();
        continue;
      }
      if (acc_trunc)
        for (std::int64_t e = 0; e < dim; ++e) o(v, e) += o_acc(v, e);
      if (mm != nullptr) {
        // Two-level: one fp32 add of the two accumulators; then V's scale and the P pre-scale,
        // each one fp32 operation, as a kernel's epilogue applies them.
        const auto p_scale = static_cast<float>(m_p_scale);
        for (std::int64_t e = 0; e < dim; ++e) {
          float acc = static_cast<float>(o(v, e));
          if (two_level) acc = acc + static_cast<float>(o_acc(v, e));
          acc = acc * m_v_col_scale[static_cast<std::size_t>(e)];
          if (p_scale != 1.0f) acc = acc / p_scale;
          o(v, e) = static_cast<GO>(acc);
        }
      }
      for (std::int64_t e = 0; e < dim; ++e) dst[e] = static_cast<double>(round_out(static_cast<F>(o(v, e)) / lf));
      lse = static_cast<double>(round_lse(static_cast<F>(m[vi]) + std::log(lf)));
    }
  }

  // One key tile of P.V for query vector v through the MMA model (flash_attention.hpp): both
  // accumulators rescaled by alpha (fp32), each output element chained over the tile's keys in
  // instructions of the model's K, and the two-level promotion every acc_promote tiles.
  template <class PM, class OM>
  void model_tile(std::int64_t v, std::int64_t nk, std::int64_t k0, float alpha, const PM& p_op, OM& o, OM& o_acc,
                  std::int64_t& since_promote, bool no_promotion) const {
    static const std::string place = "--acc-model";
    const mma_model& mm = *m_cfg.fp8.acc_model;
    const std::int64_t dim = m_c.head_dim, kk = mm.k, steps = (nk + kk - 1) / kk;
    const bool two_level = m_cfg.fp8.acc_promote > 0;
    std::vector<double> a(static_cast<std::size_t>(steps * kk), 0.0), b(static_cast<std::size_t>(kk));
    for (std::int64_t c = 0; c < nk; ++c) a[static_cast<std::size_t>(c)] = p_op(v, c);
    // The tile that promotes, under --acc-fma, rescales o_acc inside the fused add below.
    const bool promotes = two_level && since_promote + 1 == m_cfg.fp8.acc_promote && !no_promotion;
    const bool fused = promotes && m_cfg.fp8.acc_fma;
    for (std::int64_t e = 0; e < dim; ++e) {
      if (two_level && !fused) o_acc(v, e) = static_cast<float>(alpha * static_cast<float>(o_acc(v, e)));
      float acc = alpha * static_cast<float>(o(v, e));
      for (std::int64_t st = 0; st < steps; ++st) {
        for (std::int64_t i = 0; i < kk; ++i) {
          const std::int64_t key = st * kk + i;
          b[static_cast<std::size_t>(i)] = key < nk ? m_v_op[static_cast<std::size_t>((k0 + key) * dim + e)] : 0.0;
        }
        acc = static_cast<float>(
            mma_dot(mm, std::span<const double>(a).subspan(static_cast<std::size_t>(st * kk), static_cast<std::size_t>(kk)),
                    b, acc, place));
      }
      o(v, e) = acc;
    }
    if (two_level) ++since_promote;
    if (promotes) {
      for (std::int64_t e = 0; e < dim; ++e) {
        const float outer = static_cast<float>(o_acc(v, e)), inner = static_cast<float>(o(v, e));
        o_acc(v, e) = fused ? std::fma(outer, alpha, inner) : outer + inner;
        o(v, e) = 0;
      }
      since_promote = 0;
    }
  }

  const attention_inputs& m_in;
  const attention_case& m_c;
  const flash_config& m_cfg;
  std::span<const std::int64_t> m_rows;
  state_dtypes m_st;
  state_rounder<A> m_round_s, m_round_p, m_round_m, m_round_l;
  state_rounder<GO> m_round_o;
  A m_log2e = m_round_s(static_cast<A>(std::numbers::log2e));
  std::vector<double> m_q;
  std::vector<double> m_k_amax, m_v_amax;  // fp8 KV scale groups
  double m_p_scale = m_cfg.fp8.p && !m_cfg.has(fault::m_p_no_prescale) ? m_cfg.fp8.p_prescale : 1.0;
  row_matrix<GS> m_k;  // K of the (batch, KV head) being processed
  row_matrix<GO> m_v;
  std::vector<double> m_v_op;         // --acc-model: V as the MMA reads it, [S, D]
  std::vector<float> m_v_col_scale;   // --acc-model: V's scale per channel, applied after the MMA
  std::vector<query_vec> m_vecs;
  std::vector<chunk_task> m_tasks;
};

template <class A, class GS, class GO>
attention_output run_typed(const attention_inputs& in, const flash_config& cfg,
                           std::span<const std::int64_t> rows) {
  return flash_runner<A, GS, GO>(in, cfg, rows).run();
}

// Picks the arithmetic types: fp64 where any state involved is fp64, float otherwise (the
// GPU's own arithmetic). A: softmax bookkeeping (s, p, m, l); GS: the Q.K^T product; GO: the
// P.V product and the O accumulator.
template <class A, class GS>
attention_output dispatch_o(const attention_inputs& in, const flash_config& cfg,
                            std::span<const std::int64_t> rows, bool o64) {
  return o64 ? run_typed<A, GS, double>(in, cfg, rows) : run_typed<A, GS, float>(in, cfg, rows);
}

template <class A>
attention_output dispatch_s(const attention_inputs& in, const flash_config& cfg,
                            std::span<const std::int64_t> rows, bool s64, bool o64) {
  return s64 ? dispatch_o<A, double>(in, cfg, rows, o64) : dispatch_o<A, float>(in, cfg, rows, o64);
}

}  // namespace

attention_output flash_forward(const attention_inputs& in, const flash_config& cfg,
                               std::span<const std::int64_t> rows) {
  if (cfg.tile_q < 1 || cfg.tile_k < 1)
    throw_input_error("--tile", fmt::format("tile sizes must be positive, got {}x{}", cfg.tile_q, cfg.tile_k));
  if (cfg.wavefront_width < 1 || cfg.wavefront_width > 1024)
    throw_input_error("wavefront_width", fmt::format("must be in [1, 1024], got {}", cfg.wavefront_width));
  const state_dtypes st = effective_states(cfg);
  constexpr auto f64 = format_id::m_f64;
  const bool a64 = st.s == f64 || st.p == f64 || st.m == f64 || st.l == f64;
  const bool s64 = st.q == f64 || st.k == f64 || st.s == f64;
  const bool o64 = st.p == f64 || st.v == f64 || st.o == f64;
  return a64 ? dispatch_s<double>(in, cfg, rows, s64, o64) : dispatch_s<float>(in, cfg, rows, s64, o64);
}

}  // namespace numprobe::emu
