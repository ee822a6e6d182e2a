// The named MMA models (a contract: names are never reused for other numbers). Each entry is
// data; a new device or instruction is one more entry. Until issue 31's probe has measured
// the H200, the Hopper entries carry the published MMA-Sim facts (arXiv 2511.10909,
// microsoft/MMA-Sim mmasim/simulator/nv_ptx.py and arithmetic.py):
//   - Hopper wgmma: fp8 inputs keep 13 fraction bits in the fused sum and write an fp32
//     accumulator with 13 fraction bits (e8m13); f16/bf16/tf32 keep 25; alignment and the
//     output both truncate (round toward zero); the whole instruction K is one group, C in it.
//   - Hopper mma.sync f16/bf16/tf32: 25 bits, one group of K (no split-k on Hopper).
//   - Ampere mma.sync: 24 bits, m16n8k16 f16/bf16 and m16n8k8 tf32 split into two groups of
//     K/2, the first group's fp32 result entering the second as C.
//   - Ada mma.sync fp8 (m16n8k32): 13 bits, e8m13 output, two groups of 16.
//   - An fp16 accumulator (.f16 D and C): the same fused sum, its result rounded to fp16 with
//     round to nearest even (MMA-Sim's nv_fused_dot_add, output_type "f16"): the *-f16acc entries.
//   - Integer (.s32.s8.s8): exact, the s32 result wrapping, or clamped with .satfinite (PTX ISA
//     semantics; MMA-Sim has no integer model): the *-s8 entries.
// docs/hardware.md says how to replace these with measured numbers.
#include <string>
#include <vector>

#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::emu {
namespace {

using formats::format_id;
constexpr auto k_rz = mma_rounding::m_toward_zero;

mma_model make(std::string name, std::string instruction, std::string source, format_id input, int k,
               int k_group, int fraction_bits, int output_fraction_bits) {
  mma_model m;
  m.name = std::move(name);
  m.instruction = std::move(instruction);
  m.source = std::move(source);
  m.input = input;
  m.k = k;
  m.k_group = k_group;
  m.internal_fraction_bits = fraction_bits;
  m.internal_rounding = k_rz;
  m.c_in_group = true;
  m.output = format_id::m_f32;
  m.output_fraction_bits = output_fraction_bits;
  m.output_rounding = k_rz;
  return m;
}

// The fp16-accumulator variant: C and D fp16, the fused sum rounded to 10 bits to nearest even.
mma_model f16_accumulator(mma_model m) {
  m.output = format_id::m_f16;
  m.output_fraction_bits = 10;
  m.output_rounding = mma_rounding::m_nearest_even;
  return m;
}

// An s8 x s8 + s32 instruction: exact, wrapping or (satfinite) clamping.
mma_model integer(std::string name, std::string instruction, std::string source, int k, bool saturate) {
  mma_model m = make(std::move(name), std::move(instruction), std::move(source), format_id::m_i8, k, k, 0, 0);
  m.integer_saturate = saturate;
  return m;
}

mma_model interleaved(mma_model m) {
  m.k_order = mma_pairs_interleaved_order(m.k);
  m.c_added_last = true;
  m.c_last_rounding = mma_rounding::m_nearest_even;
  return m;
}

const std::vector<mma_model>& table() {
  static const std::string k_mmasim = "MMA-Sim (arXiv 2511.10909), not yet measured by numprobe";
  static const std::string k_measured = "numprobe mma on an NVIDIA H200 (sm_90), 2026-12-06";
  static const std::string k_measured_h100 = "numprobe mma on an NVIDIA H100 (sm_90), 2026-12-06";
  static const std::string k_ptx = "PTX ISA integer mma/wgmma semantics, not yet measured by numprobe";
  static const std::vector<mma_model> models = {
      make("h200-wgmma-e4m3", "wgmma.m64nNk32.f32.e4m3.e4m3", k_mmasim, format_id::m_e4m3fn, 32, 32, 13, 13),
      make("h200-wgmma-e5m2", "wgmma.m64nNk32.f32.e5m2.e5m2", k_mmasim, format_id::m_e5m2, 32, 32, 13, 13),
      make("h200-wgmma-bf16", "wgmma.m64nNk16.f32.bf16.bf16", k_mmasim, format_id::m_bf16, 16, 16, 25, 23),
      make("h200-wgmma-f16", "wgmma.m64nNk16.f32.f16.f16", k_mmasim, format_id::m_f16, 16, 16, 25, 23),
      make("h200-wgmma-tf32", "wgmma.m64nNk8.f32.tf32.tf32", k_mmasim, format_id::m_tf32, 8, 8, 25, 23),
      make("h200-mma-bf16", "mma.sync.m16n8k16.f32.bf16.bf16.f32", k_mmasim, format_id::m_bf16, 16, 16, 25, 23),
      make("h200-mma-f16", "mma.sync.m16n8k16.f32.f16.f16.f32", k_mmasim, format_id::m_f16, 16, 16, 25, 23),
      make("h200-mma-tf32", "mma.sync.m16n8k8.f32.tf32.tf32.f32", k_mmasim, format_id::m_tf32, 8, 8, 25, 23),
      make("a100-mma-bf16", "mma.sync.m16n8k16.f32.bf16.bf16.f32", k_mmasim, format_id::m_bf16, 16, 8, 24, 23),
      make("a100-mma-f16", "mma.sync.m16n8k16.f32.f16.f16.f32", k_mmasim, format_id::m_f16, 16, 8, 24, 23),
      make("l40-mma-e4m3", "mma.sync.m16n8k32.f32.e4m3.e4m3.f32", k_mmasim, format_id::m_e4m3fn, 32, 16, 13, 13),
      // Measured by numprobe on an H200 (docs/hardware.md, "fp8 mma.sync on Hopper";
      // docs/measurements/mma_h200_2026-12-06/): two groups of 16 with fp16's 25 bits, the
      // products taken k mod 4 < 2 first, the second group taking the first's truncated fp32
      // result, then C added by an fp32 addition rounded to nearest. MMA-Sim has no entry for it.
      interleaved(make("h200-mma-e4m3", "mma.sync.m16n8k32.f32.e4m3.e4m3.f32", k_measured, format_id::m_e4m3fn, 32,
                       16, 25, 23)),
      interleaved(make("h200-mma-e5m2", "mma.sync.m16n8k32.f32.e5m2.e5m2.f32", k_measured, format_id::m_e5m2, 32,
                       16, 25, 23)),
      // fp16 accumulators (MMA-Sim's Hopper fused sum, fp16 output rounded to nearest even).
      f16_accumulator(make("h200-mma-f16-f16acc", "mma.sync.m16n8k16.f16.f16.f16.f16", k_mmasim, format_id::m_f16,
                           16, 16, 25, 10)),
      f16_accumulator(make("h200-wgmma-f16-f16acc", "wgmma.m64nNk16.f16.f16.f16", k_mmasim, format_id::m_f16, 16,
                           16, 25, 10)),
      f16_accumulator(make("h200-wgmma-e4m3-f16acc", "wgmma.m64nNk32.f16.e4m3.e4m3", k_mmasim, format_id::m_e4m3fn,
                           32, 32, 13, 10)),
      f16_accumulator(make("h200-wgmma-e5m2-f16acc", "wgmma.m64nNk32.f16.e5m2.e5m2", k_mmasim, format_id::m_e5m2,
                           32, 32, 13, 10)),
      // fp8 mma.sync with an fp16 accumulator, measured by numprobe on an H100 (sm_90): the same
      // two interleaved groups of 16 as the fp32 form, each group's sum rounded to fp16 to
      // nearest (the second taking the first's as C), then C added by an fp16 addition rounded to
      // nearest (bench/mma_candidates.py, candidate A: 8192/8192 for each; docs/hardware.md).
      interleaved(f16_accumulator(make("h200-mma-e4m3-f16acc", "mma.sync.m16n8k32.f16.e4m3.e4m3.f16",
                                       k_measured_h100, format_id::m_e4m3fn, 32, 16, 25, 10))),
      interleaved(f16_accumulator(make("h200-mma-e5m2-f16acc", "mma.sync.m16n8k32.f16.e5m2.e5m2.f16",
                                       k_measured_h100, format_id::m_e5m2, 32, 16, 25, 10))),
      // Integer: exact, s32 wrapping or clamped.
      integer("h200-mma-s8", "mma.sync.m16n8k32.s32.s8.s8.s32", k_ptx, 32, false),
      integer("h200-mma-s8-satfinite", "mma.sync.m16n8k32.satfinite.s32.s8.s8.s32", k_ptx, 32, true),
      integer("h200-wgmma-s8", "wgmma.m64nNk32.s32.s8.s8", k_ptx, 32, false),
      integer("h200-wgmma-s8-satfinite", "wgmma.m64nNk32.satfinite.s32.s8.s8", k_ptx, 32, true),
  };
  return models;
}

}  // namespace

std::span<const mma_model> mma_models() { return table(); }

}  // namespace numprobe::emu
