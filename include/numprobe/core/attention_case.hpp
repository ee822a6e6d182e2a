#pragma once
// One attention case: shapes, mask, dtype, input family and seed. Its canonical id string is at
// once its printed name, its filter key and the way to rerun it (`--case ID`).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/formats/format.hpp"

namespace numprobe {

enum class mask_kind : std::uint8_t {
  m_none,
  m_causal,           // bottom-right: query i sits at absolute position S - T + i
  m_causal_top_left,  // key j visible to query i iff j <= i (right only when T == S)
  m_window,           // sliding window W, bottom-right aligned: keys in (pos - W, pos]
  m_ranges,           // explicit per-row key ranges [begin, end)
};

[[nodiscard]] std::string_view to_string(mask_kind m);
[[nodiscard]] mask_kind parse_mask(std::string_view text, const std::string& place = "--mask");

// A half-open range of key positions [begin, end).
struct key_range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  [[nodiscard]] std::int64_t size() const { return end > begin ? end - begin : 0; }
  bool operator==(const key_range&) const = default;
};

// Input families (DESIGN.md / issue 2): each designed to expose a bug class.
enum class input_dist : std::uint8_t {
  m_normal,          // N(0,1) everywhere
  m_uniform,         // U(-1,1)
  m_llm,             // heavy tails and a few outlier channels in K
  m_rescale_stress,  // each row's max logit rises with the key index: rescales on every tile
  m_max_first,       // each row's max logit sits on its first visible key: no rescale needed
  m_diffuse,         // near-uniform attention (tiny logits): long running sums
  m_shifted,         // every logit shifted by a large negative constant (finite sentinels)
  m_constant_v,      // V constant per KV head (distinct per head): GQA mapping, accumulation
  m_flat,            // K identical at every position: every logit of a row equal, exact uniform
                     // attention, the running max never rises (reductions, wavefront width)
  m_sink,            // one key (the first) far above the rest, which sit at P ~ 1e-4 of it; V with
                     // mean 1: mass lost from the numerator only (fp8 P) biases O low
};

[[nodiscard]] std::string_view to_string(input_dist d);
[[nodiscard]] input_dist parse_dist(std::string_view text, const std::string& place = "--dist");

struct attention_case {
  std::int64_t batch = 1;
  std::int64_t queries = 0;  // T; 0 means T = S
  std::int64_t seq = 1024;   // S, keys
  std::int64_t heads = 8;    // Hq
  std::int64_t kv_heads = 2; // Hkv; Hq must be a multiple
  std::int64_t head_dim = 128;
  double scale = 0.0;        // 0 means 1/sqrt(D)
  formats::format_id dtype = formats::format_id::m_bf16;
  mask_kind mask = mask_kind::m_none;
  std::int64_t window = 0;   // for m_window
  double softcap = 0.0;      // 0 = off; else logits -> cap * tanh(logits / cap)
  input_dist dist = input_dist::m_normal;
  double logit_shift = -2.0e4;  // for m_shifted
  std::uint64_t seed = 7;
  std::vector<key_range> ranges;  // for m_ranges: one per query row t (shared by batch)
  // A ragged batch (issue 30): member b holds seq_lens[b] <= S keys, the first of its S slots
  // (the rest are padding no query sees), and its T queries are bottom-right aligned to its own
  // length (query t at position seq_lens[b] - T + t). Empty: every member holds S keys.
  // Masks none, causal (bottom-right) and window only.
  std::vector<std::int64_t> seq_lens;

  [[nodiscard]] std::int64_t t() const { return queries > 0 ? queries : seq; }
  [[nodiscard]] std::int64_t rows() const { return batch * t(); }  // flat row = b * T + t
  [[nodiscard]] std::int64_t group() const { return heads / kv_heads; }
  [[nodiscard]] bool ragged() const { return !seq_lens.empty(); }
  // Keys of member b: seq_lens[b], or S.
  [[nodiscard]] std::int64_t keys_of(std::int64_t b) const {
    return seq_lens.empty() ? seq : seq_lens[static_cast<std::size_t>(b)];
  }
  [[nodiscard]] double softmax_scale() const;
  // Throws an input error naming the field when shapes or parameters are inconsistent.
  void validate() const;
  // attention(T=..,S=..,Hq=..,Hkv=..,D=..,in=bf16,mask=causal,seed=7) plus non-default fields.
  [[nodiscard]] std::string id() const;
};

// Inverse of attention_case::id(); throws an input error naming the bad field.
[[nodiscard]] attention_case parse_attention_case(std::string_view id);

// Key positions visible to query row t of a case, derived from the case definition alone.
// This is the *case's* mask; references and kernels each build their own and tests compare.
[[nodiscard]] key_range case_key_range(const attention_case& c, std::int64_t t);
// The same for query t of batch member b (a ragged batch: over the member's own keys).
[[nodiscard]] key_range case_key_range(const attention_case& c, std::int64_t b, std::int64_t t);

}  // namespace numprobe
