// Hopper warpgroup MMA probe kernels (issue 31; mma_probe.hpp): one warpgroup (128 threads) per
// designed dot product, through one `wgmma.mma_async` of shape m64n8k{8,16,32} with both
// operands in shared memory. Compiled for sm_90a only (its own object library: wgmma exists on
// sm_90a alone, PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"); the host
// refuses other devices before launching.
//
// Operand layout (PTX ISA, "Shared Memory Matrix Layout", no swizzle, K-major for A and B, which
// every input type allows): the unit is the core matrix, 8 rows of 16 bytes stored contiguously.
// Every row of A (64 x K) and of B (stored N-major: 8 rows of K) is 32 bytes for every probed
// type (k16 f16/bf16, k8 tf32, k32 e4m3/e5m2), so a row spans two core matrices along K. Core
// matrix (row group g, K half h) sits at byte (2g + h) * 128: the descriptor's leading-dimension
// byte offset (between core matrices adjacent in K) is 128, its stride-dimension byte offset
// (between core matrices adjacent in M or N) is 256.
//
// Every row of A holds the vector's a and every row of B its b, so all 64 x 8 elements of D are
// the same dot product; thread 0's first accumulator is the result and every other element must
// equal it bit for bit (NaN with NaN), which checks the M and N placement on the device itself.
// The exact-integer test of tests/gpu/test_gpu_mma.cpp checks that A and B agree on K.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include "src/kernels/gpu/mma_probe_launch.hpp"

namespace numprobe::gpu {
namespace {

constexpr int k_rows_a = 64;
constexpr int k_rows_b = 8;
constexpr int k_row_bytes = 32;
constexpr std::uint32_t k_leading_byte_offset = 128;  // K-adjacent core matrices
constexpr std::uint32_t k_stride_byte_offset = 256;   // M/N-adjacent core matrices

__device__ __forceinline__ int core_matrix_offset(int row, int byte) {
  return ((row >> 3) * 2 + (byte >> 4)) * 128 + (row & 7) * 16 + (byte & 15);
}

// The 64-bit shared-memory matrix descriptor: start address, leading- and stride-dimension byte
// offsets (each >> 4 in 14 bits), no swizzle, base offset 0.
__device__ __forceinline__ std::uint64_t smem_descriptor(const void* p) {
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  return static_cast<std::uint64_t>((addr & 0x3FFFFu) >> 4) |
         (static_cast<std::uint64_t>(k_leading_byte_offset >> 4) << 16) |
         (static_cast<std::uint64_t>(k_stride_byte_offset >> 4) << 32);
}

// One row's 32 bytes in the element format (values are exact in it; fp8 without saturation so
// NaN and e5m2 Inf stay as they are).
template <mma_probe_op OP>
__device__ void encode_row(const float* x, std::uint8_t* out) {
  if constexpr (OP == mma_probe_op::m_wgmma_f16_k16) {
    for (int i = 0; i < 16; ++i) {
      const __half h = __float2half_rn(x[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
  } else if constexpr (OP == mma_probe_op::m_wgmma_bf16_k16) {
    for (int i = 0; i < 16; ++i) {
      const __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
  } else if constexpr (OP == mma_probe_op::m_wgmma_tf32_k8) {
    std::memcpy(out, x, 32);  // the fp32 bits of tf32 values (low 13 bits zero)
  } else {
    constexpr auto kind = OP == mma_probe_op::m_wgmma_e4m3_k32 ? __NV_E4M3 : __NV_E5M2;
    for (int i = 0; i < 32; ++i) out[i] = __nv_cvt_float_to_fp8(x[i], __NV_NOSAT, kind);
  }
}

// D += A * B, scale-d 1 (C in the accumulator), no negation; f16/bf16 take the transpose
// immediates (0: K-major).
#define NUMPROBE_WGMMA(SHAPE_TYPES, TAIL)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, %4, %5, p, 1, 1" TAIL ";\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                          \
               : "l"(desc_a), "l"(desc_b), "r"(1)                                                        \
               : "memory")

// Pins the accumulator registers around the warpgroup MMA (an empty asm that reads and writes
// them), so ptxas needs no warpgroup.arrive of its own between their last write and the wgmma.
__device__ __forceinline__ void fence_accumulator(float (&d)[4]) {
  for (float& x : d) asm volatile("" : "+f"(x)::"memory");
}

template <mma_probe_op OP>
__global__ void __launch_bounds__(128) wgmma_probe_kernel(const float* a, const float* b, const float* c, float* out,
                                                          int k, unsigned* mismatches) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(128) std::uint8_t sa[k_rows_a * k_row_bytes];
  __shared__ __align__(128) std::uint8_t sb[k_rows_b * k_row_bytes];
  __shared__ float ref;
  const int v = blockIdx.x;
  const int t = threadIdx.x;
  const float* av = a + static_cast<long>(v) * k;
  const float* bv = b + static_cast<long>(v) * k;
  if (t < k_rows_a + k_rows_b) {
    std::uint8_t row[k_row_bytes];
    encode_row<OP>(t < k_rows_a ? av : bv, row);
    std::uint8_t* base = t < k_rows_a ? sa : sb;
    const int r = t < k_rows_a ? t : t - k_rows_a;
    for (int i = 0; i < k_row_bytes; ++i) base[core_matrix_offset(r, i)] = row[i];
  }
  // The generic-proxy stores must be visible to the async proxy that wgmma reads through.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const float cv = c[v];
  float d[4] = {cv, cv, cv, cv};
  const std::uint64_t desc_a = smem_descriptor(sa);
  const std::uint64_t desc_b = smem_descriptor(sb);
  fence_accumulator(d);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  if constexpr (OP == mma_probe_op::m_wgmma_f16_k16)
    NUMPROBE_WGMMA("m64n8k16.f32.f16.f16", ", 0, 0");
  else if constexpr (OP == mma_probe_op::m_wgmma_bf16_k16)
    NUMPROBE_WGMMA("m64n8k16.f32.bf16.bf16", ", 0, 0");
  else if constexpr (OP == mma_probe_op::m_wgmma_tf32_k8)
    NUMPROBE_WGMMA("m64n8k8.f32.tf32.tf32", "");
  else if constexpr (OP == mma_probe_op::m_wgmma_e4m3_k32)
    NUMPROBE_WGMMA("m64n8k32.f32.e4m3.e4m3", "");
  else
    NUMPROBE_WGMMA("m64n8k32.f32.e5m2.e5m2", "");
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  fence_accumulator(d);
  if (t == 0) ref = d[0];
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    const bool same = __float_as_uint(d[i]) == __float_as_uint(ref) || (isnan(d[i]) && isnan(ref));
    if (!same) atomicAdd(mismatches, 1u);
  }
  if (t == 0) out[v] = d[0];
#else
  // Built for sm_90a only; the host refuses other devices (mma_probe_supported).
  __trap();
#endif
}

#undef NUMPROBE_WGMMA

template <mma_probe_op OP>
void launch(int count, const float* a, const float* b, const float* c, float* d, int k, unsigned* mismatches) {
  wgmma_probe_kernel<OP><<<count, 128>>>(a, b, c, d, k, mismatches);
}

}  // namespace

void launch_wgmma_probe(mma_probe_op op, int count, const float* a, const float* b, const float* c, float* d, int k,
                        unsigned* mismatches) {
  switch (op) {
    case mma_probe_op::m_wgmma_f16_k16: launch<mma_probe_op::m_wgmma_f16_k16>(count, a, b, c, d, k, mismatches); break;
    case mma_probe_op::m_wgmma_bf16_k16: launch<mma_probe_op::m_wgmma_bf16_k16>(count, a, b, c, d, k, mismatches); break;
    case mma_probe_op::m_wgmma_tf32_k8: launch<mma_probe_op::m_wgmma_tf32_k8>(count, a, b, c, d, k, mismatches); break;
    case mma_probe_op::m_wgmma_e4m3_k32: launch<mma_probe_op::m_wgmma_e4m3_k32>(count, a, b, c, d, k, mismatches); break;
    case mma_probe_op::m_wgmma_e5m2_k32: launch<mma_probe_op::m_wgmma_e5m2_k32>(count, a, b, c, d, k, mismatches); break;
    default: break;  // mma.sync ops run in mma_probe.cu
  }
}

}  // namespace numprobe::gpu
