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
#include "src/kernels/emu/mma_model.hpp"
#include "src/kernels/fault_table.hpp"

namespace numprobe::emu {

// The faults, their names and where each applies: src/kernels/fault_table.hpp, shared with the
// GPU kernels' fault variants and the providers.
using fault = kernels::fault;
using kernels::to_string;

// index-wrap: the key index wraps at 2^15. A real int16 index turns negative at 32768 and reads
// 32768 rows *before* the base pointer (garbage or a crash, which an emulator cannot reproduce);
// the form modelled is the in-bounds one, an index kept in 15 bits (a 16-bit field with a flag
// bit, or an int16 masked non-negative): key j reads K/V row j mod 32768, while the mask still
// uses the true position j. Exact for S <= 32768, wrong past it.
using kernels::k_index_wrap_rows;

[[nodiscard]] std::span<const fault> all_faults();
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

// FP8 attention (issue 9): the three quantization points. K/V are quantized to `kv_format` with
// scales laid out per tensor, per (KV) head, per channel (d) or per token (position), each
// s = amax / max_finite(kv_format) in fp32, and dequantized by the kernel (codes x s). P is
// quantized to `p_format` after multiplying by `p_prescale` (the P.V product is divided by it
// again); l keeps the unquantized fp32 P, so mass lost by P hits the numerator only. The fp8
// MMA accumulator keeps `acc_mantissa` fraction bits (the rest truncated) and is added into an
// fp32 accumulator every `acc_promote` key tiles (0: accumulator not modelled).
//
// With `acc_model` (--acc-model NAME, issue 31) P.V runs instruction by instruction through the
// named bit-accurate model (mma_model.hpp): per key tile, O's accumulator is rescaled by alpha
// (one fp32 multiply), then each output element chains the tile's keys in instructions of the
// model's K (the last one padded with zero products), each instruction taking the running value
// as C. The operands are what the MMA reads: for an fp8 model, P's fp8 code (after the
// pre-scale) and V's fp8 code, both in the model's format, with V's scale and the pre-scale
// applied once in the epilogue (so the KV scale must not vary along the keys: tensor, head or
// channel); for a 16-bit or tf32 model, P rounded (RNE) to the model's input and V as stored,
// which must be values of that format. acc_promote > 0 adds that accumulator into a second fp32
// accumulator every acc_promote key tiles and restarts it from zero (two-level accumulation,
// vLLM's fix for FA3); acc_promote == 0 keeps the model's accumulator for the whole row, as FA3
// did before that fix. With acc_fma (--acc-fma), the promotion's rescale and add are one fused
// multiply-add, o_acc = fma(o_acc, alpha, o), rounded once: what a compiler that contracts
// `acc2 * alpha + acc` does (Triton's default, enable_fp_fusion; docs/hardware.md); the tiles
// between promotions still rescale o_acc by one rounded multiply. Q.K^T is not modelled (Q is not
// quantized here).
enum class kv_scale_layout : std::uint8_t { m_tensor, m_head, m_channel, m_token };
[[nodiscard]] std::string_view to_string(kv_scale_layout l);
[[nodiscard]] kv_scale_layout parse_kv_scale(std::string_view text, const std::string& place = "--kv-scale");

struct fp8_config {
  bool kv = false;
  formats::format_id kv_format = formats::format_id::m_e4m3fn;
  kv_scale_layout kv_scale = kv_scale_layout::m_head;
  bool p = false;
  formats::format_id p_format = formats::format_id::m_e4m3fn;
  double p_prescale = 1.0;
  std::int64_t acc_promote = 0;
  int acc_mantissa = 13;
  const mma_model* acc_model = nullptr;  // a registry entry (mma_models()), or none
  bool acc_fma = false;                  // the promotion as one fma (needs acc_model, acc_promote)
  [[nodiscard]] bool any() const { return kv || p || acc_promote > 0 || acc_model != nullptr; }
};

struct flash_config {
  std::int64_t tile_q = 64;
  std::int64_t tile_k = 64;
  state_dtypes states = default_states(formats::format_id::m_bf16);
  bool exp2 = true;  // exp(x) computed as exp2(x * log2(e)) with the prescale rounded to s dtype
  std::vector<fault> faults;
  fp8_config fp8;  // off by default
  // Disable-the-mechanism switch: O and l are rescaled on every key tile by exp(m_old - m_new)
  // from the current max registers, bypassing any conditional or lagged rescale path (the
  // skip-rescale and stale-max faults). If an error disappears with it, the rescale carries it.
  bool force_rescale = false;
  // The wavefront the row reductions over a key tile run on (wave-width fault). Column c of a
  // key tile lives in lane c mod wavefront_width; a correct kernel reduces across the whole
  // wavefront. wave-width reduces with butterfly offsets 16, 8, 4, 2, 1 only (code written for
  // 32-wide warps), so each 32-lane half reduces alone, and the value broadcast from lane 0 (the
  // reduction over lanes 0..31, i.e. columns c with c mod W < 32) is the one that reaches the row
  // state m and l; columns of lanes 32..63 still enter P.V with p = exp(x - m). With W = 32 (an
  // NVIDIA warp) or key tiles of at most 32 columns the fault is exact.
  std::int64_t wavefront_width = 64;
  // atomic-order: the seed of the key-tile order of this call. The provider draws a new one per
  // call (a call counter), as atomics land in a scheduling-dependent order.
  std::uint64_t call_seed = 0;

  [[nodiscard]] bool has(fault f) const;
  // Lanes whose values reach the row state: wavefront_width, or 32 under wave-width.
  [[nodiscard]] std::int64_t reduction_width() const;
  // "emu[tile=64x64,s=f32,...,inject=skip-rescale]" listing only non-default settings.
  [[nodiscard]] std::string describe(formats::format_id input) const;
};

// Runs the emulated kernel for the given flat rows (any subset; each query tile is processed as
// the GPU would process it, restricted to the requested rows). Inputs are the rounded inputs.
[[nodiscard]] attention_output flash_forward(const attention_inputs& in, const flash_config& cfg,
                                             std::span<const std::int64_t> rows);

}  // namespace numprobe::emu
