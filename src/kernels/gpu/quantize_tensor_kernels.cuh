#pragma once
// Whole-tensor quantize kernels (CUDA and HIP, platform.cuh): the amax pre-pass and the tensor
// scale of per-tensor fp8 and NVFP4, and the int4 -> fp16 dequant.
// - amax_abs_finite: |x| max over finite elements (atomicMax on the bits of non-negative floats).
// - tensor_scale_kernel: one thread turns the amax into the tensor scale (fp8 per-tensor) or
//   NVFP4's s_t, in double exactly as the reference does.
// - dequant_int4_f16: packed int4/uint4 -> fp16 by the 0x6400 trick (NUMERICS.md).
// Not templates: include this header in one translation unit per library (quantize.cu).
#include <cstdint>

#include "src/kernels/gpu/quantize_block_coder.cuh"

namespace numprobe::gpu::quant {

// Grid-stride over 16-element chunks (four 16-byte loads in flight per thread), a warp-shuffle
// and one shared-memory step per thread block, one atomicMax per block.
__global__ void __launch_bounds__(256) amax_abs_finite(const float* __restrict__ x, std::int64_t n,
                                                       unsigned* __restrict__ out) {
  float m = 0.f;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(x) & 15) == 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t * 16 < n;
       t += stride) {
    const std::int64_t i = t * 16;
    if (aligned && i + 16 <= n) {
      float4 q[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) q[k] = reinterpret_cast<const float4*>(x + i)[k];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float a[4] = {q[k].x, q[k].y, q[k].z, q[k].w};
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (is_finite_f(a[j])) m = fmaxf(m, std::fabs(a[j]));
      }
    } else {
      for (std::int64_t j = i; j < n && j < i + 16; ++j)
        if (is_finite_f(x[j])) m = fmaxf(m, std::fabs(x[j]));
    }
  }
#pragma unroll
  for (int k = 1; k < platform::warp_size; k <<= 1) m = fmaxf(m, platform::shfl_xor(m, k));
  __shared__ float red[256 / 32 + 1];
  const int warps = static_cast<int>(blockDim.x) / platform::warp_size;
  if (threadIdx.x % platform::warp_size == 0) red[threadIdx.x / platform::warp_size] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w) m = fmaxf(m, red[w]);
    atomicMax(out, codec::f2u(m));
  }
}

// One thread: tensor scale (fp8 per-tensor: the scale; NVFP4: s_t) from the tensor amax.
__global__ void tensor_scale_kernel(params p, const unsigned* amax_bits, float* out) {
  const float amax = codec::u2f(*amax_bits);
  if (p.kind == quant_kind::m_nvfp4) {
    // s_t = amax / (6 * 448) in fp32; an all-zero tensor keeps 1.
    *out = amax > 0 ? static_cast<float>(static_cast<double>(amax) / (6.0 * 448.0)) : 1.0f;
  } else {
    const codec::scale_value s = symmetric_scale(p, amax);
    *out = s.value;
    store_scale_code(p, 0, s.code);
  }
}

// Packed int4 (i4: two's complement; u4 with zero points) -> fp16 = (q - z) * s, one byte (two
// elements) per thread: 0x6400 | n is 1024 + n; the high nibble gives 1024 + 16 n, and
// fma(h, 1/16, -64) = n. Both exact in fp16; one fp16 multiply by the scale rounds (RNE).
__global__ void dequant_int4_f16(const std::uint8_t* __restrict__ codes, std::int64_t rows,
                                 std::int64_t cols, std::int64_t row_bytes,
                                 const std::uint16_t* __restrict__ scales,
                                 const std::uint8_t* __restrict__ zeros, std::int64_t nb_cols,
                                 std::int64_t group, std::uint16_t* __restrict__ out) {
  const std::int64_t n = rows * row_bytes;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / row_bytes, c = (i % row_bytes) * 2;
    const std::int64_t bi = row * nb_cols + c / group;
    std::uint32_t b = codes[i];
    int zoff;
    if (zeros) {
      zoff = zeros[bi];
    } else {
      b ^= 0x88u;  // two's complement nibble n -> n + 8 (unsigned), zero point 8
      zoff = 8;
    }
    const __half lo = __ushort_as_half(static_cast<unsigned short>(0x6400u | (b & 0x0Fu)));
    const __half hi = __ushort_as_half(static_cast<unsigned short>(0x6400u | (b & 0xF0u)));
    const __half ql = __hsub(lo, __float2half(1024.f + static_cast<float>(zoff)));
    const __half qh = __hfma(hi, __float2half(0.0625f), __float2half(-64.f - static_cast<float>(zoff)));
    const __half s = __ushort_as_half(scales[bi]);
    out[row * cols + c] = __half_as_ushort(__hmul(ql, s));
    if (c + 1 < cols) out[row * cols + c + 1] = __half_as_ushort(__hmul(qh, s));
  }
}

}  // namespace numprobe::gpu::quant
