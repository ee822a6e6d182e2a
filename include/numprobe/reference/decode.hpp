#pragma once
// Decode attention reference (issue 9): T = 1..8 new queries per batch member over that member's
// cached keys, GQA, and paged KV caches (a block table of pages of `page_size` slots).
//
// Semantics: member b has lengths[b] <= S cached keys (the first lengths[b] of the case's K/V);
// its query t sits at absolute position lengths[b] - T + t. mask=causal: it sees keys
// j <= that position (bottom-right); mask=none: every cached key. A member with no visible key
// gives O = 0, LSE = -inf (never NaN). Everything else is reference::attention's definition.
#include <cstdint>
#include <span>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/attention_output.hpp"

namespace numprobe::reference {

// Keys visible to query t of a member with `length` cached keys (the reference's own mask).
[[nodiscard]] key_range decode_visible_keys(const attention_case& c, std::int64_t length, std::int64_t t);

// Templated on the real type (double; cpp_bin_float_50 in tests); reference/decode_impl.hpp.
// q_rows: [rows.size(), Hq, D] for flat rows b*T + t; k, v: [B*S, Hkv, D] (contiguous, logical).
template <class Real>
[[nodiscard]] attention_output decode_generic(const attention_case& c, std::span<const std::int64_t> lengths,
                                              std::span<const double> q_rows,
                                              std::span<const std::int64_t> rows,
                                              std::span<const double> k, std::span<const double> v);

[[nodiscard]] attention_output decode(const attention_case& c, std::span<const std::int64_t> lengths,
                                      std::span<const double> q_rows, std::span<const std::int64_t> rows,
                                      std::span<const double> k, std::span<const double> v);

// Logical [B*S, Hkv, D] K or V rebuilt from a paged cache [pages, page_size, Hkv, D] through a
// block table [B, pages_per_seq] (the reference's own gather; slots past a member's length are 0).
[[nodiscard]] std::vector<double> gather_paged(const attention_case& c, std::span<const std::int64_t> lengths,
                                               std::span<const double> cache,
                                               std::span<const std::int32_t> block_table,
                                               std::int64_t pages_per_seq, std::int64_t page_size);

}  // namespace numprobe::reference
