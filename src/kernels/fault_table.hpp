#pragma once
// The injectable faults (the bug classes of NUMERICS.md): one table of their ids, names, GPU
// variant bits and the kernels each one applies to. The emulator (src/kernels/emu), the GPU
// kernels (src/kernels/gpu) and the providers all read it, so a finding on one backend is
// named, and reproduced, the same way on the others (DESIGN.md). Plain C++17 with standard
// headers only: nvcc and hipcc compile it in the GPU layer, which sees neither core nor emu.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace numprobe::kernels {

enum class fault : std::uint8_t {
  m_skip_rescale,     // O and l not rescaled when the running max rises
  m_stale_max,        // the rescale uses the max from one tile earlier
  m_rowsum_bf16,      // running sum l held in bf16
  m_acc_bf16,         // accumulator O held in bf16
  m_mask_top_left,    // causal mask aligned top-left (j <= i) instead of bottom-right
  m_no_empty_guard,   // exp(-inf - -inf) reaches l and O for rows with no valid key yet
  m_drop_tail_tile,   // a partial last key tile is ignored
  m_finite_sentinel,  // running max starts at -1e4 instead of -inf
  // split-KV decode (src/kernels/emu/flash_decode.hpp)
  m_merge_nan_empty,   // the LSE merge takes exp(-inf - -inf) when every split is empty
  m_lse_base2_merge,   // splits write a base-2 LSE that the natural-log merge reads as natural
  m_split_tail_drop,   // the last split ignores its partial tail tile
  // fp8 attention (src/kernels/emu/flash_attention.hpp, fp8_config)
  m_kv_scale_ignored,  // the K/V dequantization treats the cache scale as 1
  m_p_no_prescale,     // P is quantized to fp8 without its pre-scale
  m_acc_no_promotion,  // the limited-precision fp8 MMA accumulator is never promoted to fp32
  // issue 14: classes the emulator could not produce before
  m_gqa_mod,          // query head h reads KV head h % Hkv instead of h / (Hq / Hkv)
  m_index_wrap,       // the key row is addressed through a 15-bit index: key j reads row j mod 2^15
  m_wave_width,       // row max/sum reduced by a 32-wide butterfly on a 64-wide wavefront
  m_empty_split_nan,  // decode: an empty split writes O_i = 0/0 and the merge weights it by 0
  // issue 30: invariance (same request, same bits); docs/emulator_faults.md
  m_split_heuristic,  // decode: the split count follows batch x heads x query tiles (FA2's heuristic)
  m_atomic_order,     // prefill: key tiles are added in an order drawn per call, as atomics add
  m_decode_path,      // prefill: a T = 1 call walks its key tiles in reverse (another kernel's order)
  m_chunk_rescale,    // prefill: with 1 < T < S the running max restarts at the chunk's first tile
};

// The running max's start under m_finite_sentinel, in the emulators' logit units (the GPU
// kernels keep their own float copy in online_softmax.cuh).
inline constexpr double k_finite_sentinel = -1.0e4;

// index-wrap: the key index wraps at 2^15 (a key index kept in 15 bits): key j reads K/V row
// j mod 2^15 while the mask still uses j. The emulator and the GPU kernels read this one value.
inline constexpr std::int64_t k_index_wrap_rows = std::int64_t{1} << 15;

// The kernels a fault applies to (bit set).
enum fault_scope : std::uint8_t {
  k_emu_forward = 1u << 0,  // emu flash_forward (prefill)
  k_emu_decode = 1u << 1,   // emu split-KV decode
  k_emu_softmax = 1u << 2,  // emu looped softmax
  k_gpu_forward = 1u << 3,  // GPU flash forward: a compiled variant or a run-time flag
  k_gpu_decode = 1u << 4,   // GPU split-KV decode (run-time flags)
  k_gpu_softmax = 1u << 5,  // GPU looped softmax (compiled variants)
};

struct fault_entry {
  fault id;
  std::string_view name;
  // The GPU variant's bit in gpu::fault_bits (src/kernels/gpu/gpu_api.hpp); 0: no GPU variant.
  std::uint32_t gpu_bit;
  std::uint8_t scopes;
};

inline constexpr std::uint8_t k_emu_all = k_emu_forward | k_emu_decode;
inline constexpr std::array<fault_entry, 22> k_fault_table{{
    {fault::m_skip_rescale, "skip-rescale", 1u << 0, k_emu_forward | k_gpu_forward},
    {fault::m_stale_max, "stale-max", 1u << 1, k_emu_forward | k_gpu_forward},
    {fault::m_rowsum_bf16, "rowsum-bf16", 1u << 2, k_emu_all | k_emu_softmax | k_gpu_forward | k_gpu_softmax},
    {fault::m_acc_bf16, "acc-bf16", 1u << 3, k_emu_all | k_gpu_forward},
    {fault::m_mask_top_left, "mask-top-left", 1u << 4, k_emu_forward | k_gpu_forward},
    {fault::m_no_empty_guard, "no-empty-guard", 1u << 5, k_emu_all | k_emu_softmax | k_gpu_forward | k_gpu_softmax},
    {fault::m_drop_tail_tile, "drop-tail-tile", 1u << 6, k_emu_forward | k_gpu_forward},
    {fault::m_finite_sentinel, "finite-sentinel", 1u << 7, k_emu_all | k_emu_softmax | k_gpu_forward | k_gpu_softmax},
    {fault::m_merge_nan_empty, "merge-nan-empty", 0, k_emu_decode},
    {fault::m_lse_base2_merge, "lse-base2-merge", 0, k_emu_decode},
    {fault::m_split_tail_drop, "split-tail-drop", 0, k_emu_decode},
    {fault::m_kv_scale_ignored, "kv-scale-ignored", 0, k_emu_forward},
    {fault::m_p_no_prescale, "p-no-prescale", 0, k_emu_forward},
    {fault::m_acc_no_promotion, "acc-no-promotion", 0, k_emu_forward},
    {fault::m_gqa_mod, "gqa-mod", 1u << 8, k_emu_all | k_gpu_forward | k_gpu_decode},
    {fault::m_index_wrap, "index-wrap", 1u << 9, k_emu_all | k_gpu_forward | k_gpu_decode},
    {fault::m_wave_width, "wave-width", 0, k_emu_forward},
    {fault::m_empty_split_nan, "empty-split-nan", 1u << 10, k_emu_decode | k_gpu_decode},
    {fault::m_split_heuristic, "split-heuristic", 0, k_emu_decode},
    {fault::m_atomic_order, "atomic-order", 0, k_emu_forward},
    {fault::m_decode_path, "decode-path", 0, k_emu_forward},
    {fault::m_chunk_rescale, "chunk-rescale", 0, k_emu_forward},
}};

// The table is indexed by the enum: entry i describes fault i.
constexpr bool table_in_enum_order() {
  for (std::size_t i = 0; i < k_fault_table.size(); ++i)
    if (static_cast<std::size_t>(k_fault_table[i].id) != i) return false;
  return true;
}
static_assert(table_in_enum_order(), "k_fault_table lists the faults in enum order");

constexpr const fault_entry& entry(fault f) { return k_fault_table[static_cast<std::size_t>(f)]; }
constexpr std::string_view to_string(fault f) {
  return static_cast<std::size_t>(f) < k_fault_table.size() ? entry(f).name : "unknown-fault";
}
constexpr std::uint32_t gpu_bit(fault f) { return entry(f).gpu_bit; }
constexpr bool applies(fault f, std::uint8_t scope) { return (entry(f).scopes & scope) != 0; }

// The fault named `name`; false when no fault has that name.
constexpr bool find_fault(std::string_view name, fault& out) {
  for (const auto& e : k_fault_table)
    if (e.name == name) {
      out = e.id;
      return true;
    }
  return false;
}

// The GPU bits of every fault applying to `scope`.
constexpr std::uint32_t gpu_bits(std::uint8_t scope) {
  std::uint32_t bits = 0;
  for (const auto& e : k_fault_table)
    if ((e.scopes & scope) != 0) bits |= e.gpu_bit;
  return bits;
}

// "a, b, c": the names of the faults applying to `scope` (and, when `gpu_among` is not 0,
// whose GPU bit is in it), in table order; for error messages.
inline std::string fault_names(std::uint8_t scope, std::uint32_t gpu_among = 0) {
  std::string out;
  for (const auto& e : k_fault_table) {
    if ((e.scopes & scope) == 0 || (gpu_among != 0 && (e.gpu_bit & gpu_among) == 0)) continue;
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

}  // namespace numprobe::kernels
