// The emulated split-KV flash-decoding kernel (see flash_decode.hpp).
#include "src/kernels/emu/flash_decode.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <numbers>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "src/kernels/emu/state_rounder.hpp"

namespace numprobe::emu {
namespace {

using formats::format_id;
constexpr double k_inf = std::numeric_limits<double>::infinity();

// Keys a query sees, computed by the kernel from its own definition (not the reference's).
key_range kernel_keys(const attention_case& c, std::int64_t len, std::int64_t t) {
  if (c.mask == mask_kind::m_none) return {0, len};
  const std::int64_t hi = std::min(len, len - c.t() + t + 1);
  return {0, std::max<std::int64_t>(0, hi)};
}

struct split_out {
  std::vector<double> o;  // normalized O_i
  double lse = -k_inf;
};

}  // namespace

bool decode_config::has(fault f) const { return std::find(faults.begin(), faults.end(), f) != faults.end(); }

std::int64_t fa2_num_splits(std::int64_t work, std::int64_t sms, std::int64_t n_blocks, std::int64_t max_splits) {
  // FlashAttention-2's num_splits_heuristic (csrc/flash_attn/flash_api.cpp), restated: one
  // split when the launch almost fills the machine; else the fewest splits whose wave
  // efficiency (work x splits / SMs over its ceiling) reaches 85% of the best, counting only
  // split counts that change the blocks per split.
  if (static_cast<double>(work) >= 0.8 * static_cast<double>(sms)) return 1;
  const std::int64_t top = std::max<std::int64_t>(1, std::min({max_splits, sms, n_blocks}));
  const auto ceildiv = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  const auto eligible = [&](std::int64_t s) { return s == 1 || ceildiv(n_blocks, s) != ceildiv(n_blocks, s - 1); };
  std::vector<double> eff(static_cast<std::size_t>(top) + 1, 0.0);
  double best = 0.0;
  for (std::int64_t s = 1; s <= top; ++s) {
    if (!eligible(s)) continue;
    const double waves = static_cast<double>(work * s) / static_cast<double>(sms);
    eff[static_cast<std::size_t>(s)] = waves / std::ceil(waves);
    best = std::max(best, eff[static_cast<std::size_t>(s)]);
  }
  for (std::int64_t s = 1; s <= top; ++s)
    if (eligible(s) && eff[static_cast<std::size_t>(s)] >= 0.85 * best) return s;
  return 1;
}

bool decode_fault_supported(fault f) { return kernels::applies(f, kernels::k_emu_decode); }

std::string decode_config::describe(formats::format_id input) const {
  std::string s = fmt::format("emu-decode[tile_k={},", tile_k);
  s += split_size > 0 ? fmt::format("split_size={}", split_size) : fmt::format("splits={}", splits);
  s += fmt::format(",page={}", page_size);
  const state_dtypes d = default_states(input);
  for (std::string_view n : state_names())
    if (get_state(states, n) != get_state(d, n)) s += fmt::format(",{}={}", n, formats::name(get_state(states, n)));
  if (!faults.empty()) {
    std::vector<std::string_view> names;
    for (fault f : faults) names.push_back(to_string(f));
    s += fmt::format(",inject={}", fmt::join(names, "+"));
  }
  return s + "]";
}

paged_kv build_paged_kv(const attention_inputs& in, std::span<const std::int64_t> lengths,
                        std::int64_t page_size, std::uint64_t seed) {
  const attention_case& c = in.c();
  if (page_size < 1 || page_size > 65536)
    throw_input_error("--page-size", fmt::format("must be in [1, 65536], got {}", page_size));
  const std::int64_t row = c.kv_heads * c.head_dim, S = c.seq;
  paged_kv kv;
  kv.page_size = page_size;
  kv.pages_per_seq = (S + page_size - 1) / page_size;
  // One spare page per member, never referenced: NaN that only a wild read could pick up.
  const std::int64_t n_pages = c.batch * (kv.pages_per_seq + 1);
  std::vector<std::int32_t> order(static_cast<std::size_t>(n_pages));
  for (std::int64_t i = 0; i < n_pages; ++i) order[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  for (std::int64_t i = n_pages - 1; i > 0; --i)  // seeded Fisher-Yates: pages out of order
    std::swap(order[static_cast<std::size_t>(i)],
              order[static_cast<std::size_t>(counter_hash(seed, 0xdec0de, static_cast<std::uint64_t>(i)) %
                                             static_cast<std::uint64_t>(i + 1))]);
  kv.block_table.assign(order.begin(), order.begin() + c.batch * kv.pages_per_seq);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  kv.k_cache.assign(static_cast<std::size_t>(n_pages * page_size * row), nan);
  kv.v_cache.assign(kv.k_cache.size(), nan);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t len = lengths[static_cast<std::size_t>(b)];
    if (len < 0 || len > S) throw_input_error("lengths", fmt::format("length {} outside [0, {}]", len, S));
    for (std::int64_t j = 0; j < len; ++j) {
      const std::int64_t page = kv.block_table[static_cast<std::size_t>(b * kv.pages_per_seq + j / page_size)];
      const std::size_t dst = static_cast<std::size_t>((page * page_size + j % page_size) * row);
      const std::size_t src = static_cast<std::size_t>((b * S + j) * row);
      std::copy_n(in.k().data() + src, row, kv.k_cache.data() + dst);
      std::copy_n(in.v().data() + src, row, kv.v_cache.data() + dst);
    }
  }
  return kv;
}

attention_output flash_decode(const attention_case& c, std::span<const std::int64_t> lengths,
                              const paged_kv& kv, std::span<const double> q_rows,
                              std::span<const std::int64_t> rows, const decode_config& cfg) {
  if (c.mask != mask_kind::m_none && c.mask != mask_kind::m_causal)
    throw_input_error("--mask", "decode supports mask none or causal (bottom-right)");
  if (c.t() > 8) throw_input_error("--queries", fmt::format("decode takes 1..8 queries, got {}", c.t()));
  if (cfg.tile_k < 1) throw_input_error("--tile", "tile_k must be positive");
  if (cfg.splits < 1 || cfg.splits > 4096) throw_input_error("--splits", "must be in [1, 4096]");
  if (cfg.split_size < 0 || (cfg.split_size > 0 && cfg.split_size % cfg.tile_k != 0))
    throw_input_error("--split-size", fmt::format("must be a positive multiple of the key tile {}", cfg.tile_k));
  for (fault f : cfg.faults)
    if (!decode_fault_supported(f))
      throw_input_error("--inject", fmt::format("fault '{}' does not apply to decode", to_string(f)));
  if (static_cast<std::int64_t>(lengths.size()) != c.batch) throw_input_error("lengths", "one per batch member");

  state_dtypes st = cfg.states;
  if (cfg.has(fault::m_rowsum_bf16)) st.l = format_id::m_bf16;
  if (cfg.has(fault::m_acc_bf16)) st.o = format_id::m_bf16;
  const state_rounder<double> rs(st.s), rp(st.p), rm(st.m), rl(st.l), ro(st.o), rout(st.out), rlse(st.lse);
  const state_rounder<double> rq(st.q), rk(st.k), rv(st.v);
  const std::int64_t T = c.t(), D = c.head_dim, row_elems = c.kv_heads * D, group = c.group(), bk = cfg.tile_k;
  const double scale = c.softmax_scale(), cap = c.softcap;
  const bool guard = !cfg.has(fault::m_no_empty_guard);
  const double m_init = cfg.has(fault::m_finite_sentinel) ? -1.0e4 : -k_inf;
  const bool base2 = cfg.has(fault::m_lse_base2_merge);
  const bool gqa_mod = cfg.has(fault::m_gqa_mod);
  const bool wrap = cfg.has(fault::m_index_wrap);
  const bool empty_split_nan = cfg.has(fault::m_empty_split_nan);
  // The cache slot key j is read from: j, or j mod 2^15 under index-wrap (flash_attention.hpp).
  const auto slot = [&](std::int64_t b, std::int64_t j) {
    const std::int64_t r = wrap ? j % k_index_wrap_rows : j;
    const std::int64_t page = kv.block_table[static_cast<std::size_t>(b * kv.pages_per_seq + r / kv.page_size)];
    return page * kv.page_size + r % kv.page_size;
  };
  const double log2e = std::numbers::log2e;
  std::int64_t max_len = 0;
  for (const std::int64_t len : lengths) max_len = std::max(max_len, len);
  const std::int64_t heuristic_splits =
      fa2_num_splits(c.batch * c.heads * ((T + 63) / 64), 2 * k_heuristic_sms, (max_len + bk - 1) / bk, 128);
  attention_output out = make_poisoned_output({rows.begin(), rows.end()}, c.heads, D);
  const auto n_items = static_cast<std::int64_t>(rows.size()) * c.heads;

#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t item = 0; item < n_items; ++item) {
    const std::int64_t i = item / c.heads, h = item % c.heads;
    const std::int64_t row = rows[static_cast<std::size_t>(i)];
    const std::int64_t b = row / T, t = row % T, g = gqa_mod ? h % c.kv_heads : h / group;
    const std::int64_t len = lengths[static_cast<std::size_t>(b)];
    const key_range keys = kernel_keys(c, len, t);
    std::vector<double> q(static_cast<std::size_t>(D));
    for (std::int64_t d = 0; d < D; ++d) q[static_cast<std::size_t>(d)] = rq(q_rows[static_cast<std::size_t>((i * c.heads + h) * D + d)]);
    // Split geometry over the member's cached length (the same for all its queries).
    const std::int64_t tiles = (len + bk - 1) / bk;
    // split-heuristic: the count is chosen per call from the launch's shape, so a sequence's
    // split boundaries follow the batch it shares.
    const std::int64_t want = cfg.has(fault::m_split_heuristic) ? heuristic_splits : cfg.splits;
    const bool by_size = cfg.split_size > 0 && !cfg.has(fault::m_split_heuristic);
    const std::int64_t ss = by_size ? cfg.split_size : std::max<std::int64_t>(1, (tiles + want - 1) / want) * bk;
    const std::int64_t n_splits = by_size ? std::max<std::int64_t>(1, (len + ss - 1) / ss) : want;
    std::vector<split_out> parts(static_cast<std::size_t>(n_splits));
    std::vector<double> s(static_cast<std::size_t>(bk)), o(static_cast<std::size_t>(D));
    for (std::int64_t sp = 0; sp < n_splits; ++sp) {
      const std::int64_t s0 = sp * ss;
      std::int64_t s1 = std::min(len, s0 + ss);
      // split-tail-drop: the split holding the sequence's end stops at its last full tile.
      if (cfg.has(fault::m_split_tail_drop) && s1 == len && s1 > s0) s1 = s0 + (s1 - s0) / bk * bk;
      double m = m_init, l = 0.0;
      std::fill(o.begin(), o.end(), 0.0);
      for (std::int64_t k0 = s0; k0 < s1; k0 += bk) {
        const std::int64_t nk = std::min(bk, s1 - k0);
        double row_max = -k_inf;
        for (std::int64_t cc = 0; cc < nk; ++cc) {
          const std::int64_t j = k0 + cc;
          if (j < keys.begin || j >= keys.end) {
            s[static_cast<std::size_t>(cc)] = -k_inf;  // masked: its slot is never read
            continue;
          }
          const double* kr = kv.k_cache.data() + slot(b, j) * row_elems + g * D;
          // The MMA's accumulation, in the s dtype (fp32 unless bisection raises it).
          double dot = 0.0;
          for (std::int64_t d = 0; d < D; ++d) dot = rs(dot + q[static_cast<std::size_t>(d)] * rk(kr[d]));
          double x = rs(scale * dot);
          if (cap > 0) x = rs(cap * std::tanh(x / cap));
          s[static_cast<std::size_t>(cc)] = x;
          row_max = std::max(row_max, x);
        }
        const double m_new = rm(std::max(m, row_max));
        const double m_use = (guard && m_new == -k_inf) ? 0.0 : m_new;
        const double alpha = std::exp(m - m_use);
        double lv = rl(alpha * l);
        for (double& x : o) x = ro(alpha * x);
        for (std::int64_t cc = 0; cc < nk; ++cc) {
          const double p = rp(std::exp(s[static_cast<std::size_t>(cc)] - m_use));
          lv = rl(lv + p);
          if (p == 0.0) continue;  // masked keys: their V slot is never read either
          const std::int64_t j = k0 + cc;
          const double* vr = kv.v_cache.data() + slot(b, j) * row_elems + g * D;
          for (std::int64_t d = 0; d < D; ++d) o[static_cast<std::size_t>(d)] = ro(o[static_cast<std::size_t>(d)] + p * rv(vr[d]));
        }
        l = lv;
        m = m_new;
      }
      split_out& part = parts[static_cast<std::size_t>(sp)];
      part.o.assign(static_cast<std::size_t>(D), 0.0);
      // The split kernel's own guard: an empty split is (0, -inf). empty-split-nan has none: it
      // writes O_i = 0/0 = NaN and LSE_i = m + log(0) = -inf.
      if (l == 0.0 && !empty_split_nan) continue;
      // O_i in the o dtype and LSE_i in the lse dtype (fp32 by default), as the split writes them;
      // lse-base2-merge writes m*log2(e) + log2(l).
      for (std::int64_t d = 0; d < D; ++d) part.o[static_cast<std::size_t>(d)] = ro(o[static_cast<std::size_t>(d)] / l);
      part.lse = base2 ? rlse(m * log2e + std::log2(l)) : rlse(m + std::log(l));
    }
    // Merge (a separate kernel in fp32).
    double* dst = out.o.data() + (i * c.heads + h) * D;
    double& lse = out.lse[static_cast<std::size_t>(i * c.heads + h)];
    double mx = -k_inf;
    for (const auto& part : parts) mx = std::max(mx, part.lse);
    if (mx == -k_inf && !cfg.has(fault::m_merge_nan_empty)) {  // every split empty
      std::fill(dst, dst + D, 0.0);
      lse = -k_inf;
      continue;
    }
    double sum = 0.0;
    std::vector<double> acc(static_cast<std::size_t>(D), 0.0);
    for (const auto& part : parts) {
      // Clean: empty splits are skipped (weight 0). merge-nan-empty takes exp(lse - mx) for
      // all of them, which is exp(-inf - -inf) = NaN when every split is empty; empty-split-nan
      // relies on the weight exp(-inf - mx) = 0 too, but 0 * NaN = NaN poisons the row.
      if (part.lse == -k_inf && !cfg.has(fault::m_merge_nan_empty) && !empty_split_nan) continue;
      const double w = rlse(std::exp(part.lse - mx));
      sum = rlse(sum + w);
      for (std::int64_t d = 0; d < D; ++d)
        acc[static_cast<std::size_t>(d)] = ro(acc[static_cast<std::size_t>(d)] + w * part.o[static_cast<std::size_t>(d)]);
    }
    for (std::int64_t d = 0; d < D; ++d) dst[d] = rout(acc[static_cast<std::size_t>(d)] / sum);
    lse = rlse(mx + std::log(sum));
  }
  return out;
}

attention_output flash_decode(const attention_inputs& in, std::span<const std::int64_t> rows,
                              const decode_config& cfg) {
  const attention_case& c = in.c();
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(c.batch), c.seq);
  if (c.ragged()) lengths = c.seq_lens;  // each member's own keys (issue 30)
  const paged_kv kv = build_paged_kv(in, lengths, cfg.page_size, cfg.page_seed);
  const auto q = in.q_rows(rows);
  return flash_decode(c, lengths, kv, q, rows, cfg);
}

}  // namespace numprobe::emu
