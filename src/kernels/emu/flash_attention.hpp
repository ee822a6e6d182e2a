#pragma once
// CPU emulation of a FlashAttention-2-style forward kernel (DESIGN.md, "Emulated kernels").
// It follows the GPU algorithm step by step: query tile Bq, key tile Bk, online softmax with
// running max m, running sum l and accumulator O; exp via exp2 with a log2(e) prescale; P
// rounded to its storage dtype before P.V. Every state has a named storage dtype, and the
// real bug classes (NUMERICS.md) are injectable, named faults.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/attention_output.hpp"
#include "numprobe/formats/format.hpp"

namespace numprobe::emu {

enum class fault : std::uint8_t {
  m_skip_rescale,     // O and l not rescaled when the running max rises
  m_stale_max,        // the rescale uses the max from one tile earlier
  m_rowsum_bf16,      // running sum l held in bf16
  m_acc_bf16,         // accumulator O held in bf16
  m_mask_top_left,    // causal mask aligned top-left (j <= i) instead of bottom-right
  m_no_empty_guard,   // exp(-inf - -inf) reaches l and O for rows with no valid key yet
  m_drop_tail_tile,   // a partial last key tile is ignored
  m_finite_sentinel,  // running max starts at -1e4 instead of -inf
};

[[nodiscard]] std::span<const fault> all_faults();
[[nodiscard]] std::string_view to_string(fault f);
[[nodiscard]] fault parse_fault(std::string_view text, const std::string& place = "--inject");

// Storage dtype of every piece of state. Defaults model a bf16/fp16 FA2 kernel: inputs in the
// input dtype, scores/m/l/accumulator in fp32, P in the input dtype, output in the input dtype.
struct state_dtypes {
  formats::format_id q, k, v;   // inputs as the kernel holds them
  formats::format_id s = formats::format_id::m_f32;   // scores (MMA accumulator)
  formats::format_id p;                               // probabilities fed to P.V
  formats::format_id m = formats::format_id::m_f32;   // running max
  formats::format_id l = formats::format_id::m_f32;   // running sum
  formats::format_id o = formats::format_id::m_f32;   // output accumulator
  formats::format_id out;                             // output as written
  formats::format_id lse = formats::format_id::m_f32; // LSE as written
};

// The defaults for a case's input dtype.
[[nodiscard]] state_dtypes default_states(formats::format_id input);
// Set one state by name (q,k,v,s,p,m,l,o,out,lse); throws an input error naming `place`.
void set_state(state_dtypes& st, std::string_view name, formats::format_id f,
               const std::string& place = "--state");
[[nodiscard]] std::span<const std::string_view> state_names();
[[nodiscard]] formats::format_id get_state(const state_dtypes& st, std::string_view name);

struct flash_config {
  std::int64_t tile_q = 64;
  std::int64_t tile_k = 64;
  state_dtypes states = default_states(formats::format_id::m_bf16);
  bool exp2 = true;  // exp(x) computed as exp2(x * log2(e)) with the prescale rounded to s dtype
  std::vector<fault> faults;

  [[nodiscard]] bool has(fault f) const;
  // "emu[tile=64x64,s=f32,...,inject=skip-rescale]" listing only non-default settings.
  [[nodiscard]] std::string describe(formats::format_id input) const;
};

// Runs the emulated kernel for the given flat rows (any subset; each query tile is processed as
// the GPU would process it, restricted to the requested rows). Inputs are the rounded inputs.
[[nodiscard]] attention_output flash_forward(const attention_inputs& in, const flash_config& cfg,
                                             std::span<const std::int64_t> rows);

}  // namespace numprobe::emu
