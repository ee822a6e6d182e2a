#pragma once
// CPU emulation of split-KV flash-decoding over a paged KV cache (issue 9). Each member's keys
// are cut into splits (a fixed count, or a fixed size); each split runs the online softmax over
// key tiles read through the block table and writes (O_i, LSE_i); a merge combines them:
// LSE = log sum exp(LSE_i), O = sum exp(LSE_i - LSE) O_i. An empty split has LSE_i = -inf and
// contributes 0; if every split is empty the merge gives O = 0, LSE = -inf, never NaN.
//
// Which rows have an empty split (empty-split-nan): splits are cut from the member's cached
// length, the same for all its T queries, so under the causal mask query t (visible keys
// [0, len - T + t + 1)) sees nothing of a last split that starts past its diagonal (a split
// size, or a split count, whose last split holds fewer than T keys); and a split count larger
// than the key tiles leaves splits past the end empty for every row (short contexts).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/attention_output.hpp"
#include "src/kernels/emu/flash_attention.hpp"

namespace numprobe::emu {

struct decode_config {
  std::int64_t tile_k = 64;      // keys per tile inside a split
  std::int64_t splits = 4;       // splits per member (used when split_size == 0)
  std::int64_t split_size = 0;   // keys per split, a multiple of tile_k (0: use `splits`)
  std::int64_t page_size = 16;   // KV cache page (slots per page)
  std::uint64_t page_seed = 1;   // the block table's page order
  state_dtypes states = default_states(formats::format_id::m_bf16);
  std::vector<fault> faults;     // decode_fault_supported(): the merge faults, some state ones

  [[nodiscard]] bool has(fault f) const;
  [[nodiscard]] std::string describe(formats::format_id input) const;
};

[[nodiscard]] bool decode_fault_supported(fault f);

// split-heuristic: the SM count of the machine modelled (an H100 or H200 has 132; FA2 doubles it
// for its 128-thread blocks) and FlashAttention-2's split count for `work` = batch x heads x
// 64-query blocks over `n_blocks` key blocks (docs/emulator_faults.md).
inline constexpr std::int64_t k_heuristic_sms = 132;
[[nodiscard]] std::int64_t fa2_num_splits(std::int64_t work, std::int64_t sms, std::int64_t n_blocks,
                                          std::int64_t max_splits);

// A paged cache: [pages, page_size, Hkv, D] for K and V, pages handed out in a seeded shuffled
// order through block_table [B, pages_per_seq]. Slots past each member's length, and spare
// pages, hold NaN: a kernel that reads them leaks NaN into its output.
struct paged_kv {
  std::int64_t page_size = 16;
  std::int64_t pages_per_seq = 0;
  std::vector<std::int32_t> block_table;
  std::vector<double> k_cache, v_cache;
};

[[nodiscard]] paged_kv build_paged_kv(const attention_inputs& in, std::span<const std::int64_t> lengths,
                                      std::int64_t page_size, std::uint64_t seed);

// Decode over a paged cache: member b has lengths[b] keys; query t of member b sits at
// lengths[b] - T + t (mask causal: bottom-right; none: every cached key). q_rows: [rows, Hq, D].
[[nodiscard]] attention_output flash_decode(const attention_case& c, std::span<const std::int64_t> lengths,
                                            const paged_kv& kv, std::span<const double> q_rows,
                                            std::span<const std::int64_t> rows, const decode_config& cfg);

// The same with every member at the case's S, the cache paged from `in` (the provider's path).
[[nodiscard]] attention_output flash_decode(const attention_inputs& in, std::span<const std::int64_t> rows,
                                            const decode_config& cfg);

}  // namespace numprobe::emu
