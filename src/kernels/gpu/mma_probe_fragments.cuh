#pragma once
// Register fragments shared by the probe kernels (issue 31): mma.sync's A and B, and wgmma's A
// when it is read from registers (the RS form), which uses mma.sync's layout per warp (PTX ISA,
// "Register Fragments" for mma.m16n8k{8,16,32} and wgmma .m64nNk{8,16,32}). Every row of A holds
// the same vector, so only the K placement matters: which k each register's elements carry.
//   16-bit (k16): reg0 = (row g, k 2t, 2t+1), reg1 = (row g+8, same k), reg2 = (row g, k 2t+8,
//                 2t+9), reg3 = (row g+8, same); B: reg0 = k 2t, 2t+1 of column g, reg1 = 2t+8, 2t+9.
//   tf32 (k8):    reg0 = (g, k t), reg1 = (g+8, k t), reg2 = (g, k t+4), reg3 = (g+8, k t+4);
//                 B: reg0 = k t, reg1 = k t+4. The fp32 bits as they are (tf32 values: low 13
//                 bits zero).
//   8-bit (k32):  reg0 = (g, k 4t..4t+3), reg1 = (g+8, same), reg2 = (g, k 16+4t..), reg3 =
//                 (g+8, same); B: reg0 = k 4t..4t+3 of column g, reg1 = k 16+4t... (fp8 and s8).
// t is the lane's threadID_in_group (lane % 4). Included by CUDA sources only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include "src/kernels/gpu/mma_probe_launch.hpp"

namespace numprobe::gpu {

__device__ __forceinline__ std::uint32_t pack_f16(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);  // exact: the values are fp16 values
  std::uint32_t r;
  std::memcpy(&r, &h, 4);
  return r;
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // exact: bf16 values
  std::uint32_t r;
  std::memcpy(&r, &h, 4);
  return r;
}

// Four fp8 values, element 0 in the low byte. __NV_NOSAT keeps NaN (and e5m2 Inf) as they are;
// the values are exact in the format, so no rounding happens.
template <__nv_fp8_interpretation_t KIND>
__device__ __forceinline__ std::uint32_t pack_fp8(const float* x) {
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<std::uint32_t>(__nv_cvt_float_to_fp8(x[i], __NV_NOSAT, KIND)) << (8 * i);
  return r;
}

__device__ __forceinline__ std::uint32_t pack_s8(const float* x) {
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(static_cast<std::int8_t>(x[i]))) << (8 * i);
  return r;
}

// Four consecutive k of an 8-bit input from x.
template <in_kind IN>
__device__ __forceinline__ std::uint32_t pack4(const float* x) {
  if constexpr (IN == in_kind::s8) {
    return pack_s8(x);
  } else {
    constexpr auto kind = IN == in_kind::e4m3 ? __NV_E4M3 : __NV_E5M2;
    return pack_fp8<kind>(x);
  }
}

// Two consecutive k of a 16-bit input from x.
template <in_kind IN>
__device__ __forceinline__ std::uint32_t pack2(const float* x) {
  return IN == in_kind::f16 ? pack_f16(x[0], x[1]) : pack_bf16(x[0], x[1]);
}

// A's four registers for a vector `av` (its K values), lane t = lane % 4.
template <in_kind IN>
__device__ __forceinline__ void load_a_fragment(const float* av, int t, std::uint32_t (&ra)[4]) {
  if constexpr (IN == in_kind::f16 || IN == in_kind::bf16) {
    ra[0] = ra[1] = pack2<IN>(av + 2 * t);
    ra[2] = ra[3] = pack2<IN>(av + 2 * t + 8);
  } else if constexpr (IN == in_kind::tf32) {
    ra[0] = ra[1] = __float_as_uint(av[t]);
    ra[2] = ra[3] = __float_as_uint(av[t + 4]);
  } else {
    ra[0] = ra[1] = pack4<IN>(av + 4 * t);
    ra[2] = ra[3] = pack4<IN>(av + 16 + 4 * t);
  }
}

// B's two registers for a vector `bv`.
template <in_kind IN>
__device__ __forceinline__ void load_b_fragment(const float* bv, int t, std::uint32_t (&rb)[2]) {
  if constexpr (IN == in_kind::f16 || IN == in_kind::bf16) {
    rb[0] = pack2<IN>(bv + 2 * t);
    rb[1] = pack2<IN>(bv + 2 * t + 8);
  } else if constexpr (IN == in_kind::tf32) {
    rb[0] = __float_as_uint(bv[t]);
    rb[1] = __float_as_uint(bv[t + 4]);
  } else {
    rb[0] = pack4<IN>(bv + 4 * t);
    rb[1] = pack4<IN>(bv + 16 + 4 * t);
  }
}

// An fp16 held in the low 16 bits of h, as fp32 bits (exact: every fp16 value is an fp32 value).
__device__ __forceinline__ std::uint32_t half_to_float_bits(std::uint32_t h) {
  __half x;
  const auto b = static_cast<unsigned short>(h & 0xFFFFu);
  std::memcpy(&x, &b, 2);
  return __float_as_uint(__half2float(x));
}

}  // namespace numprobe::gpu
