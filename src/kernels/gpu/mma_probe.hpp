#pragma once
// Host interface of the tensor-core probe kernels (issue 31; docs/hardware.md): runs a batch
// of designed dot products through one MMA instruction and returns the accumulator element
// each produced. Plain C++ (no vendor headers), so providers compile with the host compiler.
// CUDA only: the kernels are inline PTX (mma.sync, and wgmma on sm_90a); an AMD MFMA probe is
// not written.
#include <cstdint>
#include <string>
#include <vector>

namespace numprobe::gpu {

enum class mma_probe_op : std::uint8_t {
  m_f16_k16,   // mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32   (sm_80+)
  m_bf16_k16,  // mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (sm_80+)
  m_tf32_k8,   // mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32  (sm_80+)
  m_e4m3_k32,  // mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 (sm_89+)
  m_e5m2_k32,  // mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 (sm_89+)
  // Warpgroup MMA, both operands from shared memory (wgmma_probe.cu; sm_90 only: sm_90a code).
  m_wgmma_f16_k16,   // wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16
  m_wgmma_bf16_k16,  // wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
  m_wgmma_tf32_k8,   // wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32
  m_wgmma_e4m3_k32,  // wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3
  m_wgmma_e5m2_k32,  // wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2
  // fp16 accumulators (C and D fp16).
  m_f16_k16_f16acc,        // mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16  (sm_80+)
  m_e4m3_k32_f16acc,       // mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 (sm_89+, nvcc 12.4+)
  m_e5m2_k32_f16acc,       // mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16 (sm_89+, nvcc 12.4+)
  m_wgmma_f16_k16_f16acc,  // wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16
  m_wgmma_e4m3_k32_f16acc, // wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e4m3
  m_wgmma_e5m2_k32_f16acc, // wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e5m2
  // Integer (s8 x s8 + s32): the result wraps, or with .satfinite is clamped.
  m_s8_k32,             // mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (sm_80+)
  m_s8_k32_sat,         // mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32
  m_wgmma_s8_k32,       // wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8
  m_wgmma_s8_k32_sat,   // wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.s8.s8
  // wgmma with A from registers (the RS form, as FlashAttention-3's P.V), B from shared memory,
  // fp32 accumulators.
  m_wgmma_rs_f16_k16,
  m_wgmma_rs_bf16_k16,
  m_wgmma_rs_tf32_k8,
  m_wgmma_rs_e4m3_k32,
  m_wgmma_rs_e5m2_k32,
};

// The accumulator of an op: fp32, fp16, or s32.
enum class mma_probe_acc : std::uint8_t { m_f32, m_f16, m_s32 };
[[nodiscard]] mma_probe_acc mma_probe_accumulator(mma_probe_op op);

[[nodiscard]] int mma_probe_k(mma_probe_op op);
// "" when a device of compute capability `arch` (90 for sm_90) runs the op, else why not.
[[nodiscard]] std::string mma_probe_unsupported(mma_probe_op op, int arch);
[[nodiscard]] const char* mma_probe_instruction(mma_probe_op op);

struct mma_probe_device {
  int ordinal = 0;
  std::string name;
  int arch = 0;  // 90 for sm_90
};

// Throws a backend error (exit 3) naming the failing call when the device is absent.
[[nodiscard]] mma_probe_device cuda_mma_probe_device(int ordinal);

// count dot products of length k = mma_probe_k(op): a and b hold count * k values of the
// input format (as float: exact; s8 values are small integers), c holds count accumulator
// words: the fp32 bits of C for fp32 and fp16 accumulators (an fp16 value widened exactly), the
// two's complement s32 for integer ones. The result words are in the same encoding. Every row of
// A holds a vector's a, every column of B its b, every element of C its c; the result is D(0,0),
// and every other element of D must equal it (a backend error otherwise: the fragment placement
// is wrong).
[[nodiscard]] std::vector<std::uint32_t> cuda_mma_probe(int ordinal, mma_probe_op op, int count, const float* a,
                                                        const float* b, const std::uint32_t* c);

}  // namespace numprobe::gpu
