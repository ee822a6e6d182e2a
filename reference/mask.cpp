// The reference's own mask. It is written from the mask definitions in NUMERICS.md, not from
// core's case_key_range or any kernel, so that a shared misreading cannot hide (test design
// rule 6). Every supported mask keeps one contiguous run of keys, described here by its
// first and last visible key (inclusive) before clipping to the sequence.
#include <algorithm>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "numprobe/reference/attention.hpp"

namespace numprobe::reference {

key_range visible_keys(const attention_case& c, std::int64_t t) { return visible_keys(c, 0, t); }

key_range visible_keys(const attention_case& c, std::int64_t member, std::int64_t t) {
  std::int64_t n_keys = c.seq;
  if (!c.seq_lens.empty()) {
    if (member < 0 || member >= static_cast<std::int64_t>(c.seq_lens.size()))
      throw_input_error("reference::visible_keys", fmt::format("member {} outside the ragged batch", member));
    n_keys = c.seq_lens[static_cast<std::size_t>(member)];
  }
  const std::int64_t n_queries = c.t();
  if (t < 0 || t >= n_queries)
    throw_input_error("reference::visible_keys",
                      fmt::format("query row {} outside [0, {})", t, n_queries));
  // Bottom-right alignment: the last query sits on the last key, so query t has absolute
  // position t + (S - T). With T > S the first T - S queries see nothing under causal.
  const std::int64_t position = t + (n_keys - n_queries);
  std::int64_t first = 0;
  std::int64_t last = n_keys - 1;
  switch (c.mask) {
    case mask_kind::m_none: break;
    case mask_kind::m_causal: last = position; break;
    case mask_kind::m_causal_top_left: last = t; break;
    case mask_kind::m_window:  // keys in (position - W, position]
      last = position;
      first = position - c.window + 1;
      break;
    case mask_kind::m_ranges: {
      if (static_cast<std::int64_t>(c.ranges.size()) != n_queries)
        throw_input_error("reference::visible_keys",
                          fmt::format("mask=ranges needs {} ranges, got {}", n_queries,
                                      c.ranges.size()));
      const key_range& given = c.ranges[static_cast<std::size_t>(t)];
      first = given.begin;
      last = given.end - 1;
      break;
    }
  }
  first = std::max<std::int64_t>(first, 0);
  last = std::min(last, n_keys - 1);
  if (last < first) {
    const std::int64_t at = std::min(first, n_keys);
    return key_range{at, at};
  }
  return key_range{first, last + 1};
}

}  // namespace numprobe::reference
