#pragma once
// block_rows x 128 tile quantize kernels (DeepSeek-V3 weights; CUDA and HIP, platform.cuh).
// - quantize_block2d<Threads>: one thread block per tile held in registers (the HIP kernel, and
//   the CUDA bench's baseline).
// - quantize_block2d_smem<Threads, MinBlocks>: the tile held in shared memory (the CUDA kernel).
#include <cstdint>

#include "src/kernels/gpu/quantize_block_coder.cuh"

namespace numprobe::gpu::quant {

// Max over a thread block of `threads` threads (a warp-shuffle step, then one shared-memory
// step over the warps); every thread gets the result.
template <int Threads>
__device__ __forceinline__ float block_max(float v) {
  constexpr int warps = Threads / platform::warp_size;
#pragma unroll
  for (int m = 1; m < platform::warp_size; m <<= 1) v = fmaxf(v, platform::shfl_xor(v, m));
  __shared__ float red[warps];
  if (threadIdx.x % platform::warp_size == 0) red[threadIdx.x / platform::warp_size] = v;
  __syncthreads();
  float m = red[0];
#pragma unroll
  for (int w = 1; w < warps; ++w) m = fmaxf(m, red[w]);
  return m;
}

// block_rows x 128 tiles (DeepSeek-V3 weights), one thread block per tile, the tile held in
// registers: 32 column quads (coalesced 512-byte row loads) x Threads / 32 row groups, R rows
// per thread (Threads * R = 32 * 128).
// Fast: one max per element for the amax, the Fast e4m3 coding (bench/gpu_quant's variant 4;
// the plain form is the HIP kernel and the CUDA bench's baseline).
template <int Threads, bool Fast = false>
__global__ void __launch_bounds__(Threads) quantize_block2d(params p) {
  constexpr int groups = Threads / 32, R = 128 / groups;
  const int cq = threadIdx.x % 32, rg = threadIdx.x / 32;
  const std::int64_t br = blockIdx.y, bc = blockIdx.x;
  const std::int64_t row0 = br * p.block_rows, c0 = bc * 128 + cq * 4;
  const bool aligned = (p.cols & 3) == 0;
  float v[R][4];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const std::int64_t lr = rg + groups * i;
    const std::int64_t row = row0 + lr;
    const bool row_ok = lr < p.block_rows && row < p.rows;
    const float* src = p.x + row * p.cols + c0;
    if (row_ok && aligned && c0 < p.cols) {
      const float4 q = *reinterpret_cast<const float4*>(src);
      v[i][0] = q.x; v[i][1] = q.y; v[i][2] = q.z; v[i][3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[i][j] = row_ok && c0 + j < p.cols ? src[j] : 0.f;
    }
  }
  if constexpr (Fast) {
    amax = finite_amax<R * 4>(&v[0][0]);
  } else {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (is_finite_f(v[i][j])) amax = fmaxf(amax, std::fabs(v[i][j]));
  }
  amax = block_max<Threads>(amax);
  std::uint32_t scode = 0;
  const block_coder b = make_coder<quant_kind::m_block2d, quant_elem::m_e4m3>(p, amax, 1.f, 0.f, scode);
  if (threadIdx.x == 0) store_scale_code(p, br * p.nb_cols + bc, scode);
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const std::int64_t lr = rg + groups * i;
    const std::int64_t row = row0 + lr;
    if (lr >= p.block_rows || row >= p.rows || c0 >= p.cols) continue;
    std::uint32_t c[4];
    encode4<quant_kind::m_block2d, quant_elem::m_e4m3, Fast>(p, b, v[i], c);
    store_codes4(p, row, c0, c, aligned);
  }
}

// Dynamic shared memory of quantize_block2d_smem: one 128 x 128 fp32 tile.
inline constexpr int tile_smem_bytes = 128 * 128 * 4;

// block_rows x 128 tiles, one thread block per tile as quantize_block2d, the tile held in shared
// memory instead of registers: each thread copies its own R float4 (32 column quads x
// Threads / 32 row groups; one copy instruction reads 512 contiguous bytes of a row) with
// asynchronous copies, takes the amax from them, and codes them after the block maximum. Few
// registers, so three tiles (192 KiB) are resident per SM at different phases, where the
// register kernel fits two; Fast coding.
template <int Threads, int MinBlocks, bool Whole = true>
__global__ void __launch_bounds__(Threads, MinBlocks) quantize_block2d_smem(params p) {
  constexpr int groups = Threads / 32, R = 128 / groups;
  extern __shared__ float4 tile[];  // [R][Threads]: thread t's float4 i at tile[i * Threads + t]
  const int cq = threadIdx.x % 32, rg = threadIdx.x / 32;
  const std::int64_t br = blockIdx.y, bc = blockIdx.x;
  const std::int64_t row0 = br * p.block_rows, c0 = bc * 128 + cq * 4;
  const bool aligned = (p.cols & 3) == 0;
  // Whole: a full 128 x 128 tile inside the tensor (every tile but the edge ones) takes a path
  // without per-row bounds tests, its row addresses stepped by increments (the profile of the
  // general path showed it issue-bound: SM throughput 71%, DRAM 55%).
  const bool whole = Whole && aligned && p.block_rows == 128 && row0 + 128 <= p.rows && bc * 128 + 128 <= p.cols;
  if (whole) {
    const float* src = p.x + (row0 + rg) * p.cols + c0;
    const std::int64_t step = groups * p.cols;
#pragma unroll
    for (int i = 0; i < R; ++i, src += step) platform::copy_16_async(tile + i * Threads + threadIdx.x, src, true);
  } else {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const std::int64_t lr = rg + groups * i;
      const std::int64_t row = row0 + lr;
      const bool ok = lr < p.block_rows && row < p.rows && c0 < p.cols;
      const float* src = ok ? p.x + row * p.cols + c0 : p.x;
      float4* dst = tile + i * Threads + threadIdx.x;
      if (aligned) {
        platform::copy_16_async(dst, src, ok);
      } else {
        float4 q;
        q.x = ok ? src[0] : 0.f;
        q.y = ok && c0 + 1 < p.cols ? src[1] : 0.f;
        q.z = ok && c0 + 2 < p.cols ? src[2] : 0.f;
        q.w = ok && c0 + 3 < p.cols ? src[3] : 0.f;
        *dst = q;
      }
    }
  }
  platform::copy_commit();
  platform::copy_wait<0>();  // own copies only: no barrier needed for the data
  // |v| max over the finite values (one max per element, see finite_amax).
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const float4 q = tile[i * Threads + threadIdx.x];
    amax = fmaxf(fmaxf(amax, fmaxf(std::fabs(q.x), std::fabs(q.y))), fmaxf(std::fabs(q.z), std::fabs(q.w)));
  }
  if (!(amax <= 3.4028235e38f)) {
    amax = 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float4 q = tile[i * Threads + threadIdx.x];
      const float a[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (is_finite_f(a[j])) amax = fmaxf(amax, std::fabs(a[j]));
    }
  }
  amax = block_max<Threads>(amax);
  std::uint32_t scode = 0;
  const block_coder b = make_coder<quant_kind::m_block2d, quant_elem::m_e4m3>(p, amax, 1.f, 0.f, scode);
  if (threadIdx.x == 0) store_scale_code(p, br * p.nb_cols + bc, scode);
  if (whole) {
    std::uint8_t* dst = p.codes + (row0 + rg) * p.row_bytes + c0;
    const std::int64_t step = groups * p.row_bytes;
#pragma unroll 4
    for (int i = 0; i < R; ++i, dst += step) {
      const float4 q = tile[i * Threads + threadIdx.x];
      const float v[4] = {q.x, q.y, q.z, q.w};
      std::uint32_t c[4];
      encode4<quant_kind::m_block2d, quant_elem::m_e4m3, true>(p, b, v, c);
      *reinterpret_cast<std::uint32_t*>(dst) = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const std::int64_t lr = rg + groups * i;
    const std::int64_t row = row0 + lr;
    if (lr >= p.block_rows || row >= p.rows || c0 >= p.cols) continue;
    const float4 q = tile[i * Threads + threadIdx.x];
    const float v[4] = {q.x, q.y, q.z, q.w};
    std::uint32_t c[4];
    encode4<quant_kind::m_block2d, quant_elem::m_e4m3, true>(p, b, v, c);
    store_codes4(p, row, c0, c, aligned);
  }
}

}  // namespace numprobe::gpu::quant
