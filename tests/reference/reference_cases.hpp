#pragma once
// The attention cases the reference tests run: lengths around the 64-key tile (1, 63, 64,
// 65, 129, 300), T != S in both directions, every mask, GQA groups 1 and 4, softcap, a custom
// scale, batch 2 and the structured input families.
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/base/rng.hpp"

namespace numprobe::test {

inline attention_case make_case(std::int64_t t, std::int64_t s, std::int64_t hq, std::int64_t hkv,
                                std::int64_t d, mask_kind mask) {
  attention_case c;
  c.queries = t;
  c.seq = s;
  c.heads = hq;
  c.kv_heads = hkv;
  c.head_dim = d;
  c.mask = mask;
  c.dtype = formats::format_id::m_f64;  // unrounded inputs: the most demanding for the proof
  return c;
}

// Seeded random ranges in [0, S], some empty (the empty-split hazard).
inline void fill_random_ranges(attention_case& c) {
  c.ranges.clear();
  for (std::int64_t t = 0; t < c.t(); ++t) {
    const auto u = counter_hash(c.seed, 99, static_cast<std::uint64_t>(t));
    const std::int64_t begin = static_cast<std::int64_t>(u % static_cast<std::uint64_t>(c.seq + 1));
    const std::int64_t len = t % 7 == 3 ? 0
        : static_cast<std::int64_t>((u >> 32) % static_cast<std::uint64_t>(c.seq - begin + 1));
    c.ranges.push_back({begin, begin + len});
  }
}

inline std::vector<attention_case> reference_cases() {
  using mask_kind::m_causal, mask_kind::m_causal_top_left, mask_kind::m_none,
      mask_kind::m_ranges, mask_kind::m_window;
  std::vector<attention_case> cs;
  auto add = [&](attention_case c) { cs.push_back(std::move(c)); };
  add(make_case(1, 1, 1, 1, 32, m_none));
  add(make_case(5, 1, 4, 1, 32, m_causal));  // T > S: four rows see nothing
  add(make_case(17, 63, 4, 1, 32, m_causal));
  add(make_case(64, 64, 4, 4, 32, m_causal_top_left));
  add(make_case(3, 64, 4, 1, 32, m_causal_top_left));  // top-left with T != S: a different mask
  {
    auto c = make_case(65, 65, 2, 2, 32, m_window);
    c.window = 16;
    add(c);
  }
  {
    auto c = make_case(30, 129, 4, 1, 32, m_causal);
    c.softcap = 5.0;
    add(c);
  }
  add(make_case(129, 65, 2, 1, 32, m_causal));  // T > S: rows before T - S are fully masked
  {
    auto c = make_case(40, 300, 4, 1, 32, m_none);
    c.scale = 0.3;
    c.batch = 2;
    add(c);
  }
  {
    auto c = make_case(300, 300, 8, 2, 16, m_window);
    c.window = 64;
    c.batch = 2;
    add(c);
  }
  {
    auto c = make_case(20, 129, 4, 4, 32, m_ranges);
    fill_random_ranges(c);
    add(c);
  }
  {
    auto c = make_case(64, 300, 4, 1, 32, m_causal);
    c.dist = input_dist::m_llm;
    c.softcap = 30.0;
    add(c);
  }
  {
    auto c = make_case(65, 129, 4, 1, 32, m_causal);
    c.dist = input_dist::m_rescale_stress;
    add(c);
  }
  {
    auto c = make_case(8, 300, 4, 2, 128, m_none);
    c.dist = input_dist::m_shifted;  // every logit near -2e4: exp must see max-subtracted logits
    add(c);
  }
  return cs;
}

}  // namespace numprobe::test
