// Hopper warpgroup MMA probe kernels (issue 31; mma_probe.hpp): one warpgroup (128 threads) per
// designed dot product, through one `wgmma.mma_async` of shape m64n8k{8,16,32} with both
// operands in shared memory. Compiled for sm_90a only (its own object library: wgmma exists on
// sm_90a alone, PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"); the host
// refuses other devices before launching.
//
// Operand layout (PTX ISA, "Shared Memory Matrix Layout", no swizzle, K-major for A and B, which
// every input type allows): the unit is the core matrix, 8 rows of 16 bytes stored contiguously.
// Every row of A (64 x K) and of B (stored N-major: 8 rows of K) is 32 bytes for every probed
// type (k16 f16/bf16, k8 tf32, k32 e4m3/e5m2/s8), so a row spans two core matrices along K. Core
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

#include "src/kernels/gpu/mma_probe_fragments.cuh"
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
// NaN and e5m2 Inf stay as they are; s8 values are small integers).
template <mma_probe_op OP>
__device__ void encode_row(const float* x, std::uint8_t* out) {
  constexpr in_kind IN = input_of(OP);
  if constexpr (IN == in_kind::f16) {
    for (int i = 0; i < 16; ++i) {
      const __half h = __float2half_rn(x[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
  } else if constexpr (IN == in_kind::bf16) {
    for (int i = 0; i < 16; ++i) {
      const __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
  } else if constexpr (IN == in_kind::tf32) {
    std::memcpy(out, x, 32);  // the fp32 bits of tf32 values (low 13 bits zero)
  } else if constexpr (IN == in_kind::s8) {
    for (int i = 0; i < 32; ++i) out[i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(x[i]));
  } else {
    constexpr auto kind = IN == in_kind::e4m3 ? __NV_E4M3 : __NV_E5M2;
    for (int i = 0; i < 32; ++i) out[i] = __nv_cvt_float_to_fp8(x[i], __NV_NOSAT, kind);
  }
}

// D += A * B, scale-d 1 (C in the accumulator). Floating types take imm-scale-a/b (1: no
// negation), f16/bf16 also the transpose immediates (0: K-major); integer types take neither.
// fp32 and s32 accumulators are 4 registers per thread for m64n8, fp16 ones 2 (f16x2).
#define NUMPROBE_WGMMA4(SHAPE_TYPES, CONSTRAINT, TAIL)                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, %4, %5, p" TAIL ";\n}\n"      \
               : CONSTRAINT(d[0]), CONSTRAINT(d[1]), CONSTRAINT(d[2]), CONSTRAINT(d[3])                  \
               : "l"(desc_a), "l"(desc_b), "r"(1)                                                        \
               : "memory")
// The RS form: A from four registers (mma_probe_fragments.cuh), B from shared memory; floating
// types take imm-scale-a/b, f16/bf16 also imm-trans-b (there is no A transpose from registers).
#define NUMPROBE_WGMMA_RS(SHAPE_TYPES, TAIL)                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"                                              \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES                                               \
               " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p" TAIL ";\n}\n"                                      \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                         \
               : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(desc_b), "r"(1)                    \
               : "memory")
#define NUMPROBE_WGMMA2(SHAPE_TYPES, TAIL)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"                                              \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {%0,%1}, %2, %3, p" TAIL ";\n}\n"           \
               : "+r"(d[0]), "+r"(d[1])                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(1)                                                       \
               : "memory")

// Pins the accumulator registers around the warpgroup MMA (an empty asm that reads and writes
// them), so ptxas needs no warpgroup.arrive of its own between their last write and the wgmma.
template <int N>
__device__ __forceinline__ void fence_accumulator(float (&d)[N]) {
  for (float& x : d) asm volatile("" : "+f"(x)::"memory");
}
template <int N>
__device__ __forceinline__ void fence_accumulator(std::uint32_t (&d)[N]) {
  for (std::uint32_t& x : d) asm volatile("" : "+r"(x)::"memory");
}

__device__ __forceinline__ std::uint32_t f16_pair(float x) {
  const __half2 h = __floats2half2_rn(x, x);  // exact: C is an fp16 value
  std::uint32_t r;
  std::memcpy(&r, &h, 4);
  return r;
}

// Issues the op's wgmma on the accumulator `d` (fenced before and after).
template <mma_probe_op OP, class R, int N>
__device__ __forceinline__ void wgmma_once(R (&d)[N], std::uint64_t desc_a, std::uint64_t desc_b,
                                           const std::uint32_t (&ra)[4]) {
  fence_accumulator(d);
  for (std::uint32_t x : ra) asm volatile("" ::"r"(x) : "memory");  // A's registers written before the fence
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  if constexpr (OP == mma_probe_op::m_wgmma_rs_f16_k16)
    NUMPROBE_WGMMA_RS("m64n8k16.f32.f16.f16", ", 1, 1, 0");
  else if constexpr (OP == mma_probe_op::m_wgmma_rs_bf16_k16)
    NUMPROBE_WGMMA_RS("m64n8k16.f32.bf16.bf16", ", 1, 1, 0");
  else if constexpr (OP == mma_probe_op::m_wgmma_rs_tf32_k8)
    NUMPROBE_WGMMA_RS("m64n8k8.f32.tf32.tf32", ", 1, 1");
  else if constexpr (OP == mma_probe_op::m_wgmma_rs_e4m3_k32)
    NUMPROBE_WGMMA_RS("m64n8k32.f32.e4m3.e4m3", ", 1, 1");
  else if constexpr (OP == mma_probe_op::m_wgmma_rs_e5m2_k32)
    NUMPROBE_WGMMA_RS("m64n8k32.f32.e5m2.e5m2", ", 1, 1");
  else if constexpr (OP == mma_probe_op::m_wgmma_f16_k16)
    NUMPROBE_WGMMA4("m64n8k16.f32.f16.f16", "+f", ", 1, 1, 0, 0");
  else if constexpr (OP == mma_probe_op::m_wgmma_bf16_k16)
    NUMPROBE_WGMMA4("m64n8k16.f32.bf16.bf16", "+f", ", 1, 1, 0, 0");
  else if constexpr (OP == mma_probe_op::m_wgmma_tf32_k8)
    NUMPROBE_WGMMA4("m64n8k8.f32.tf32.tf32", "+f", ", 1, 1");
  else if constexpr (OP == mma_probe_op::m_wgmma_e4m3_k32)
    NUMPROBE_WGMMA4("m64n8k32.f32.e4m3.e4m3", "+f", ", 1, 1");
  else if constexpr (OP == mma_probe_op::m_wgmma_e5m2_k32)
    NUMPROBE_WGMMA4("m64n8k32.f32.e5m2.e5m2", "+f", ", 1, 1");
  else if constexpr (OP == mma_probe_op::m_wgmma_f16_k16_f16acc)
    NUMPROBE_WGMMA2("m64n8k16.f16.f16.f16", ", 1, 1, 0, 0");
  else if constexpr (OP == mma_probe_op::m_wgmma_e4m3_k32_f16acc)
    NUMPROBE_WGMMA2("m64n8k32.f16.e4m3.e4m3", ", 1, 1");
  else if constexpr (OP == mma_probe_op::m_wgmma_e5m2_k32_f16acc)
    NUMPROBE_WGMMA2("m64n8k32.f16.e5m2.e5m2", ", 1, 1");
  else if constexpr (OP == mma_probe_op::m_wgmma_s8_k32)
    NUMPROBE_WGMMA4("m64n8k32.s32.s8.s8", "+r", "");
  else
    NUMPROBE_WGMMA4("m64n8k32.satfinite.s32.s8.s8", "+r", "");
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  fence_accumulator(d);
}

template <mma_probe_op OP>
__global__ void __launch_bounds__(128) wgmma_probe_kernel(const float* a, const float* b, const std::uint32_t* c,
                                                          std::uint32_t* out, int k, unsigned* mismatches) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr mma_probe_acc ACC = acc_of(OP);
  __shared__ __align__(128) std::uint8_t sa[k_rows_a * k_row_bytes];
  __shared__ __align__(128) std::uint8_t sb[k_rows_b * k_row_bytes];
  __shared__ std::uint32_t ref;
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
  const std::uint64_t desc_a = smem_descriptor(sa);
  const std::uint64_t desc_b = smem_descriptor(sb);
  // The RS form reads A from registers in mma.sync's per-warp layout (every row holds the same
  // vector, so each warp's 16 rows are alike); the SS form ignores them.
  std::uint32_t ra[4] = {0, 0, 0, 0};
  if constexpr (a_in_registers(OP)) load_a_fragment<input_of(OP)>(av, t & 3, ra);
  const std::uint32_t cw = c[v];
  // The four D elements this thread holds, as accumulator words (fp32 bits, or s32).
  std::uint32_t words[4];
  if constexpr (ACC == mma_probe_acc::m_f32) {
    const float cv = __uint_as_float(cw);
    float d[4] = {cv, cv, cv, cv};
    wgmma_once<OP>(d, desc_a, desc_b, ra);
    for (int i = 0; i < 4; ++i) words[i] = __float_as_uint(d[i]);
  } else if constexpr (ACC == mma_probe_acc::m_f16) {
    const std::uint32_t c2 = f16_pair(__uint_as_float(cw));
    std::uint32_t d[2] = {c2, c2};
    wgmma_once<OP>(d, desc_a, desc_b, ra);
    for (int i = 0; i < 4; ++i) words[i] = half_to_float_bits(d[i / 2] >> (16 * (i % 2)));
  } else {
    std::uint32_t d[4] = {cw, cw, cw, cw};
    wgmma_once<OP>(d, desc_a, desc_b, ra);
    for (int i = 0; i < 4; ++i) words[i] = d[i];
  }
  if (t == 0) ref = words[0];
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    const bool nan_pair = ACC != mma_probe_acc::m_s32 && isnan(__uint_as_float(words[i])) && isnan(__uint_as_float(ref));
    if (words[i] != ref && !nan_pair) atomicAdd(mismatches, 1u);
  }
  if (t == 0) out[v] = words[0];
#else
  // Built for sm_90a only; the host refuses other devices (mma_probe_unsupported).
  __trap();
#endif
}

#undef NUMPROBE_WGMMA4
#undef NUMPROBE_WGMMA2
#undef NUMPROBE_WGMMA_RS

template <mma_probe_op OP>
void launch(int count, const float* a, const float* b, const std::uint32_t* c, std::uint32_t* d, int k,
            unsigned* mismatches) {
  wgmma_probe_kernel<OP><<<count, 128>>>(a, b, c, d, k, mismatches);
}

}  // namespace

void launch_wgmma_probe(mma_probe_op op, int count, const float* a, const float* b, const std::uint32_t* c,
                        std::uint32_t* d, int k, unsigned* mismatches) {
#define NUMPROBE_CASE(OP) \
  case mma_probe_op::OP: launch<mma_probe_op::OP>(count, a, b, c, d, k, mismatches); break;
  switch (op) {
    NUMPROBE_CASE(m_wgmma_f16_k16)
    NUMPROBE_CASE(m_wgmma_bf16_k16)
    NUMPROBE_CASE(m_wgmma_tf32_k8)
    NUMPROBE_CASE(m_wgmma_e4m3_k32)
    NUMPROBE_CASE(m_wgmma_e5m2_k32)
    NUMPROBE_CASE(m_wgmma_f16_k16_f16acc)
    NUMPROBE_CASE(m_wgmma_e4m3_k32_f16acc)
    NUMPROBE_CASE(m_wgmma_e5m2_k32_f16acc)
    NUMPROBE_CASE(m_wgmma_s8_k32)
    NUMPROBE_CASE(m_wgmma_s8_k32_sat)
    NUMPROBE_CASE(m_wgmma_rs_f16_k16)
    NUMPROBE_CASE(m_wgmma_rs_bf16_k16)
    NUMPROBE_CASE(m_wgmma_rs_tf32_k8)
    NUMPROBE_CASE(m_wgmma_rs_e4m3_k32)
    NUMPROBE_CASE(m_wgmma_rs_e5m2_k32)
    default: break;  // mma.sync ops run in mma_probe.cu
  }
#undef NUMPROBE_CASE
}

}  // namespace numprobe::gpu
