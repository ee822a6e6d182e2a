#pragma once
// The emulated kernel's own mask and key-tile schedule. It is written from the mask definitions
// (NUMERICS.md) independently of case_key_range() and of the reference, so that a mask bug in
// one cannot hide in the other (test design rule 6).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "numprobe/core/attention_case.hpp"

namespace numprobe::emu {

// Key positions visible to a query, as the kernel computes them.
struct kernel_mask {
  mask_kind kind = mask_kind::m_none;
  std::int64_t queries = 0;  // T
  std::int64_t keys = 0;     // S
  std::int64_t window = 0;
  const std::vector<key_range>* ranges = nullptr;

  // `top_left` models the mask-top-left fault: a causal mask aligned as if T == S.
  kernel_mask(const attention_case& c, bool top_left)
      : kind(c.mask), queries(c.t()), keys(c.seq), window(c.window), ranges(&c.ranges) {
    if (top_left && kind == mask_kind::m_causal) kind = mask_kind::m_causal_top_left;
  }

  // Half-open [begin, end) of visible keys for query row t; empty when begin >= end.
  [[nodiscard]] key_range row(std::int64_t t) const {
    const std::int64_t diag = keys - queries + t;  // the query's absolute position
    std::int64_t lo = 0, hi = keys;
    switch (kind) {
      case mask_kind::m_none: break;
      case mask_kind::m_causal: hi = diag + 1; break;
      case mask_kind::m_causal_top_left: hi = t + 1; break;
      case mask_kind::m_window:
        lo = diag - window + 1;
        hi = diag + 1;
        break;
      case mask_kind::m_ranges:
        lo = (*ranges)[static_cast<std::size_t>(t)].begin;
        hi = (*ranges)[static_cast<std::size_t>(t)].end;
        break;
    }
    lo = std::max<std::int64_t>(lo, 0);
    hi = std::min<std::int64_t>(hi, keys);
    return {lo, std::max(lo, hi)};
  }
};

// Key tiles [first, last) a CTA (one query tile) walks. Like real kernels, the CTA visits the
// hull of its rows' visible keys: tiles fully masked for the whole CTA are skipped, while a tile
// fully masked for one row but not for another in the same CTA is processed for both (that row
// relies on the empty-row guard).
struct tile_span {
  std::int64_t first = 0;
  std::int64_t last = 0;
};

[[nodiscard]] inline tile_span cta_key_tiles(const kernel_mask& mask, std::int64_t query_tile,
                                             std::int64_t tile_q, std::int64_t tile_k,
                                             bool drop_tail_tile) {
  const std::int64_t t0 = query_tile * tile_q;
  const std::int64_t t1 = std::min(mask.queries, t0 + tile_q);
  std::int64_t lo = mask.keys, hi = 0;
  for (std::int64_t t = t0; t < t1; ++t) {
    const key_range r = mask.row(t);
    if (r.size() == 0) continue;
    lo = std::min(lo, r.begin);
    hi = std::max(hi, r.end);
  }
  if (lo >= hi) return {0, 0};
  tile_span span{lo / tile_k, (hi + tile_k - 1) / tile_k};
  // drop-tail-tile fault: the partial last key tile of the sequence is never loaded.
  const std::int64_t n_tiles = (mask.keys + tile_k - 1) / tile_k;
  if (drop_tail_tile && mask.keys % tile_k != 0 && span.last == n_tiles) --span.last;
  if (span.last < span.first) span.last = span.first;
  return span;
}

}  // namespace numprobe::emu
