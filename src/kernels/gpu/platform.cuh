#pragma once
// The one place with vendor #ifs (DESIGN.md, "One kernel source for two vendors"). Every .cu
// file in src/kernels/gpu/ is compiled by nvcc for NVIDIA and by hipcc (-x hip) for AMD; kernel
// code uses only the names below. Warp width comes from here, never a literal 32.
//
// Vendor facts that can change numerics are collected in platform::numerics_facts() and end
// up in every report's metadata (exp implementation, tanh, MMA accumulation).
#include <cstdint>
#include <string>
#include <type_traits>

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#define NUMPROBE_GPU_HIP 1
#include <hip/hip_bfloat16.h>  // ROCm 5.2 has no hip_bf16.h (__hip_bfloat16)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#define NUMPROBE_GPU_CUDA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

namespace numprobe::gpu::platform {

#if NUMPROBE_GPU_HIP
// ---------------------------------------------------------------- AMD (HIP) -----------------
using error_t = hipError_t;
using stream_t = hipStream_t;
using event_t = hipEvent_t;
using device_prop_t = hipDeviceProp_t;
using bf16 = hip_bfloat16;  // float constructor rounds to nearest even
using fp16 = __half;
inline constexpr const char* vendor = "hip";
inline constexpr error_t success = hipSuccess;
inline constexpr bool has_mma_sync = false;  // CDNA MFMA path not written: scalar kernel
#define NUMPROBE_GPU_API(name) hip##name
inline const char* error_string(error_t e) { return hipGetErrorString(e); }
#if defined(__AMDGCN_WAVEFRONT_SIZE)
inline constexpr int warp_size = __AMDGCN_WAVEFRONT_SIZE;
#else
inline constexpr int warp_size = 64;
#endif
inline constexpr const char* exp_impl = "exp2f (ocml, __ocml_exp2_f32): exp(x) = 2^(x*log2 e), prescale in fp32";
inline constexpr const char* mma_impl = "none: scalar fp32 FMA dot products (no MFMA path yet)";
inline constexpr const char* tanh_impl = "tanhf (ocml)";

__device__ __forceinline__ float exp2_approx(float x) { return exp2f(x); }
__device__ __forceinline__ float bf16_to_float(bf16 x) { return static_cast<float>(x); }
__device__ __forceinline__ bf16 float_to_bf16_rn(float x) { return bf16(x); }
__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor(v, mask, warp_size); }

// cp.async has no AMD equivalent: a synchronous 16-byte copy keeps the pipeline's structure.
__device__ __forceinline__ void copy_16_async(void* smem, const void* gmem, bool valid) {
  auto* d = static_cast<uint4*>(smem);
  *d = valid ? *static_cast<const uint4*>(gmem) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ void copy_commit() {}
template <int N>
__device__ __forceinline__ void copy_wait() {}
// The quantize kernels stage 2D tiles through shared memory only where copies are asynchronous.
inline constexpr bool has_async_copy = false;

// Declared so that the tensor-core kernel template parses; the launcher never instantiates it
// on this platform (has_mma_sync == false).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&)[4], const void*) { __builtin_trap(); }
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&)[4], const void*) { __builtin_trap(); }
template <class T>
__device__ __forceinline__ void mma_16816(float (&)[4], const uint32_t (&)[4], uint32_t, uint32_t) {
  __builtin_trap();
}

// Quantize: no fp8 conversion instruction is used on AMD (gfx90a has none; gfx940's
// v_cvt_pk_fp8_f32 is e4m3fnuz, not OCP e4m3fn): the software encoder runs instead.
inline constexpr bool has_cvt_e4m3 = false;
inline constexpr const char* cvt_e4m3_impl = "software (bit manipulation, RNE, saturating)";
__device__ __forceinline__ uint32_t cvt_e4m3x2_satfinite(float, float) { __builtin_trap(); return 0; }
// Bulk copies completing on shared-memory barriers (Hopper cp.async.bulk + mbarrier): none on
// AMD; declared so that the pipelined 2D quantize kernel parses, never launched here.
inline constexpr bool has_bulk_copy = false;
__device__ __forceinline__ void mbar_init(std::uint64_t*, unsigned) { __builtin_trap(); }
__device__ __forceinline__ void mbar_fence_init() { __builtin_trap(); }
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t*, unsigned) { __builtin_trap(); }
__device__ __forceinline__ void mbar_arrive(std::uint64_t*) { __builtin_trap(); }
__device__ __forceinline__ void mbar_wait(std::uint64_t*, unsigned) { __builtin_trap(); }
template <bool EvictFirst>
__device__ __forceinline__ void bulk_copy_g2s(void*, const void*, unsigned, std::uint64_t*) { __builtin_trap(); }
__device__ __forceinline__ void named_barrier_sync(int, int) { __builtin_trap(); }
__device__ __forceinline__ void sync_warp() {}  // a wavefront runs in lock-step (ROCm 5.2)
inline constexpr auto memcpy_d2d = hipMemcpyDeviceToDevice;

inline constexpr auto memcpy_h2d = hipMemcpyHostToDevice;
inline constexpr auto memcpy_d2h = hipMemcpyDeviceToHost;
inline constexpr auto func_attr_max_dynamic_smem = hipFuncAttributeMaxDynamicSharedMemorySize;
inline constexpr auto attr_clock_rate = hipDeviceAttributeClockRate;
#define NUMPROBE_GPU_BACKEND_API_NAME hip_api
#define NUMPROBE_GPU_QUANT_API_NAME hip_quant_api
#define NUMPROBE_GPU_DECODE_API_NAME hip_decode_api
inline std::string arch_name(const device_prop_t& p) {
  std::string a = p.gcnArchName;
  return a.substr(0, a.find(':'));  // "gfx90a:sramecc+:xnack-" -> "gfx90a"
}
inline std::int64_t shared_per_block_optin(const device_prop_t& p) {
  return static_cast<std::int64_t>(p.sharedMemPerBlock);
}

#else
// ---------------------------------------------------------------- NVIDIA (CUDA) -------------
using error_t = cudaError_t;
using stream_t = cudaStream_t;
using event_t = cudaEvent_t;
using device_prop_t = cudaDeviceProp;
using bf16 = __nv_bfloat16;
using fp16 = __half;
inline constexpr const char* vendor = "cuda";
inline constexpr error_t success = cudaSuccess;
inline constexpr bool has_mma_sync = true;
#define NUMPROBE_GPU_API(name) cuda##name
inline const char* error_string(error_t e) { return cudaGetErrorString(e); }
inline constexpr int warp_size = 32;  // NVIDIA's architectural warp width (warpSize)
inline constexpr const char* exp_impl = "ex2.approx.ftz.f32: exp(x) = 2^(x*log2 e), prescale in fp32";
inline constexpr const char* mma_impl =
    "mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: fp32 accumulation, P rounded to the input dtype";
inline constexpr const char* tanh_impl = "tanhf (CUDA libdevice, accurate)";

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float shfl_xor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask, warp_size);
}
__device__ __forceinline__ float bf16_to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 float_to_bf16_rn(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ void copy_16_async(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;  // 0: zero-fill, gmem not read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void copy_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
inline constexpr bool has_async_copy = true;  // cp.async (sm_80+)

// Quantize: OCP e4m3 by the hardware conversion (sm_89+): RNE, +-inf and overflow to +-448,
// NaN to NaN. Packs lo in bits 0-7, hi in bits 8-15. Elsewhere the software encoder runs.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
inline constexpr bool has_cvt_e4m3 = true;
__device__ __forceinline__ uint32_t cvt_e4m3x2_satfinite(float lo, float hi) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
#else
inline constexpr bool has_cvt_e4m3 = false;
__device__ __forceinline__ uint32_t cvt_e4m3x2_satfinite(float, float) { __trap(); return 0; }
#endif
inline constexpr const char* cvt_e4m3_impl = "cvt.rn.satfinite.e4m3x2.f32 (sm_89+), software below";
// Bulk copies global -> shared completing on a shared-memory mbarrier (cp.async.bulk, sm_90+;
// the launcher checks the device). Below sm_90 the bodies trap (never launched there).
inline constexpr bool has_bulk_copy = true;
__device__ __forceinline__ void sync_warp() { __syncwarp(); }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (before the CTA barrier).
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
  } while (!done);
}
// `bytes` (a multiple of 16) from 16-byte aligned gmem to 16-byte aligned smem; EvictFirst: the
// source lines are marked evict-first in L2 (read once).
template <bool EvictFirst>
__device__ __forceinline__ void bulk_copy_g2s(void* smem, const void* gmem, unsigned bytes, std::uint64_t* bar) {
  if constexpr (EvictFirst) {
    std::uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
        ::"r"(smem_addr(smem)), "l"(gmem), "r"(bytes), "r"(smem_addr(bar)), "l"(pol) : "memory");
  } else {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_addr(smem)), "l"(gmem), "r"(bytes), "r"(smem_addr(bar)) : "memory");
  }
}
// Barrier `id` (1..15; 0 is __syncthreads) over the first `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
#else
__device__ __forceinline__ void mbar_init(std::uint64_t*, unsigned) { __trap(); }
__device__ __forceinline__ void mbar_fence_init() { __trap(); }
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t*, unsigned) { __trap(); }
__device__ __forceinline__ void mbar_arrive(std::uint64_t*) { __trap(); }
__device__ __forceinline__ void mbar_wait(std::uint64_t*, unsigned) { __trap(); }
template <bool EvictFirst>
__device__ __forceinline__ void bulk_copy_g2s(void*, const void*, unsigned, std::uint64_t*) { __trap(); }
__device__ __forceinline__ void named_barrier_sync(int, int) { __trap(); }
#endif
inline constexpr auto memcpy_d2d = cudaMemcpyDeviceToDevice;

inline constexpr auto memcpy_h2d = cudaMemcpyHostToDevice;
inline constexpr auto memcpy_d2h = cudaMemcpyDeviceToHost;
inline constexpr auto func_attr_max_dynamic_smem = cudaFuncAttributeMaxDynamicSharedMemorySize;
inline constexpr auto attr_clock_rate = cudaDevAttrClockRate;
#define NUMPROBE_GPU_BACKEND_API_NAME cuda_api
#define NUMPROBE_GPU_QUANT_API_NAME cuda_quant_api
#define NUMPROBE_GPU_DECODE_API_NAME cuda_decode_api
inline std::string arch_name(const device_prop_t& p) {
  return "sm_" + std::to_string(p.major) + std::to_string(p.minor);
}
inline std::int64_t shared_per_block_optin(const device_prop_t& p) {
  return static_cast<std::int64_t>(p.sharedMemPerBlockOptin);
}

// ldmatrix: four 8x8 b16 matrices; lane l supplies the row address of matrix l/8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

// D = A(16x16, row) * B(16x8, col) + C, fp32 accumulation.
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (std::is_same_v<T, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
#endif

// ---------------------------------------------------------------- common ---------------------
// Element conversions, by element type (bf16 or fp16), identical for both vendors' headers.
template <class T>
__device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, bf16>) return bf16_to_float(x);
  else return __half2float(x);
}
template <class T>
__device__ __forceinline__ T from_float(float x) {  // round to nearest even
  if constexpr (std::is_same_v<T, bf16>) return float_to_bf16_rn(x);
  else return __float2half_rn(x);
}
// Two floats rounded to T, packed low | high << 16 (the MMA fragment layout).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const T l = from_float<T>(lo), h = from_float<T>(hi);
  uint16_t lb, hb;
  __builtin_memcpy(&lb, &l, 2);
  __builtin_memcpy(&hb, &h, 2);
  return static_cast<uint32_t>(lb) | (static_cast<uint32_t>(hb) << 16);
}
__device__ __forceinline__ float round_bf16(float x) { return bf16_to_float(float_to_bf16_rn(x)); }

}  // namespace numprobe::gpu::platform
