#pragma once
// Between the probe harness (mma_probe.cu) and the wgmma kernels (wgmma_probe.cu, compiled for
// sm_90a alone in its own object library): device pointers in, one output per dot product out.
// Included by CUDA sources only.
#include "src/kernels/gpu/mma_probe.hpp"

namespace numprobe::gpu {

// The input element of an op's A and B.
enum class in_kind : std::uint8_t { f16, bf16, tf32, e4m3, e5m2, s8 };

inline __host__ __device__ constexpr in_kind input_of(mma_probe_op op) {
  switch (op) {
    case mma_probe_op::m_bf16_k16:
    case mma_probe_op::m_wgmma_bf16_k16:
    case mma_probe_op::m_wgmma_rs_bf16_k16: return in_kind::bf16;
    case mma_probe_op::m_tf32_k8:
    case mma_probe_op::m_wgmma_tf32_k8:
    case mma_probe_op::m_wgmma_rs_tf32_k8: return in_kind::tf32;
    case mma_probe_op::m_wgmma_rs_e4m3_k32:
    case mma_probe_op::m_e4m3_k32:
    case mma_probe_op::m_wgmma_e4m3_k32:
    case mma_probe_op::m_e4m3_k32_f16acc:
    case mma_probe_op::m_wgmma_e4m3_k32_f16acc: return in_kind::e4m3;
    case mma_probe_op::m_wgmma_rs_e5m2_k32:
    case mma_probe_op::m_e5m2_k32:
    case mma_probe_op::m_wgmma_e5m2_k32:
    case mma_probe_op::m_e5m2_k32_f16acc:
    case mma_probe_op::m_wgmma_e5m2_k32_f16acc: return in_kind::e5m2;
    case mma_probe_op::m_s8_k32:
    case mma_probe_op::m_s8_k32_sat:
    case mma_probe_op::m_wgmma_s8_k32:
    case mma_probe_op::m_wgmma_s8_k32_sat: return in_kind::s8;
    default: return in_kind::f16;
  }
}

inline __host__ __device__ constexpr mma_probe_acc acc_of(mma_probe_op op) {
  switch (op) {
    case mma_probe_op::m_f16_k16_f16acc:
    case mma_probe_op::m_e4m3_k32_f16acc:
    case mma_probe_op::m_e5m2_k32_f16acc:
    case mma_probe_op::m_wgmma_f16_k16_f16acc:
    case mma_probe_op::m_wgmma_e4m3_k32_f16acc:
    case mma_probe_op::m_wgmma_e5m2_k32_f16acc: return mma_probe_acc::m_f16;
    case mma_probe_op::m_s8_k32:
    case mma_probe_op::m_s8_k32_sat:
    case mma_probe_op::m_wgmma_s8_k32:
    case mma_probe_op::m_wgmma_s8_k32_sat: return mma_probe_acc::m_s32;
    default: return mma_probe_acc::m_f32;
  }
}


// True for the RS form (A from registers).
inline __host__ __device__ constexpr bool a_in_registers(mma_probe_op op) {
  switch (op) {
    case mma_probe_op::m_wgmma_rs_f16_k16:
    case mma_probe_op::m_wgmma_rs_bf16_k16:
    case mma_probe_op::m_wgmma_rs_tf32_k8:
    case mma_probe_op::m_wgmma_rs_e4m3_k32:
    case mma_probe_op::m_wgmma_rs_e5m2_k32: return true;
    default: return false;
  }
}

// Launches count warpgroups of the wgmma probe for `op` (a wgmma op) on the current device;
// every D element that differs from D(0,0) adds one to *mismatches.
void launch_wgmma_probe(mma_probe_op op, int count, const float* a, const float* b, const std::uint32_t* c,
                        std::uint32_t* d, int k, unsigned* mismatches);

}  // namespace numprobe::gpu
