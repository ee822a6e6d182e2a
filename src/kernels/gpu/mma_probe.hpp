#pragma once
// Host interface of the tensor-core probe kernels (issue 31; docs/hardware.md): runs a batch
// of designed dot products through one MMA instruction and returns the accumulator element
// each produced. Plain C++ (no vendor headers), so providers compile with the host compiler.
// CUDA only: the kernels are inline PTX (mma.sync); an AMD MFMA probe is not written.
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
};

[[nodiscard]] int mma_probe_k(mma_probe_op op);
[[nodiscard]] int mma_probe_min_arch(mma_probe_op op);  // 80 or 89
[[nodiscard]] const char* mma_probe_instruction(mma_probe_op op);

struct mma_probe_device {
  int ordinal = 0;
  std::string name;
  int arch = 0;  // 90 for sm_90
};

// Throws a backend error (exit 3) naming the failing call when the device is absent.
[[nodiscard]] mma_probe_device cuda_mma_probe_device(int ordinal);

// count dot products of length k = mma_probe_k(op): a and b hold count * k values of the
// input format (as float: exact), c holds count fp32 values. Every row of A holds a vector's
// a, every column of B its b, every element of C its c; the result is D(0,0), and every other
// element of D must equal it (a backend error otherwise: the fragment placement is wrong).
[[nodiscard]] std::vector<float> cuda_mma_probe(int ordinal, mma_probe_op op, int count, const float* a,
                                                const float* b, const float* c);

}  // namespace numprobe::gpu
