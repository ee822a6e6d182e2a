#pragma once
// Bench-only 128x128 quantize kernel (bench/gpu_quant, launch variants 5-8): tiles by persistent
// blocks that load the next tile with bulk copies while they code the current one (CUDA sm_90).
// Slower than quantize_block2d_smem on the H200 (docs/measurements/h200_quant_bandwidth_2026-11-30.txt,
// runs 7-8), kept to measure again on other devices.
#include <cstdint>

#include "src/kernels/gpu/quantize_tile_kernels.cuh"

namespace numprobe::gpu::quant {

// Dynamic shared memory of quantize_block2d_pipe: Stages tiles of 128 x 128 fp32.
template <int Stages>
inline constexpr int pipe_smem_bytes = Stages * tile_smem_bytes;

// block_rows x 128 tiles by persistent thread blocks with a ring of Stages tiles in shared memory
// (CUDA sm_90: platform::has_bulk_copy; the launcher also needs cols % 4 == 0). One producer
// warp (the last) fills the ring with one bulk copy per tile row (cp.async.bulk, completing on
// the stage's `full` barrier) as soon as the consumers have released a stage (`empty`), so tile
// loads stay in flight while Consumers threads code the tiles before them. Tiles are taken in
// row-major order t = blockIdx.x + k * gridDim.x. Each consumer copies its R float4 to registers
// and releases the stage at once, so even one stage overlaps the next tile's load with the
// coding of the current one (Stages 1 and MinBlocks 2: two blocks of 512 + 32 threads per SM).
// Columns past the row end and rows past the last row are not copied (their shared memory holds
// older data) and are masked. Fast coding, as quantize_block2d_smem.
template <int Consumers, int Stages, int MinBlocks, bool EvictFirst = false>
__global__ void __launch_bounds__(Consumers + 32, MinBlocks) quantize_block2d_pipe(params p) {
  constexpr int groups = Consumers / 32, R = 128 / groups;
  extern __shared__ float4 ring[];  // [Stages][128 rows][32 column quads]
  __shared__ std::uint64_t full[Stages], empty[Stages];
  __shared__ float red[2][groups];
  const std::int64_t tiles = p.nb_cols * ((p.rows + p.block_rows - 1) / p.block_rows);
  if (threadIdx.x == 0) {
    for (int s = 0; s < Stages; ++s) {
      platform::mbar_init(&full[s], 1);
      platform::mbar_init(&empty[s], groups);
    }
    platform::mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x >= Consumers) {  // producer warp
    const int lane = threadIdx.x - Consumers;
    int k = 0;
    for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x, ++k) {
      const int s = k % Stages;
      if (k >= Stages) platform::mbar_wait(&empty[s], static_cast<unsigned>((k / Stages - 1) & 1));
      const std::int64_t br = t / p.nb_cols, bc = t - br * p.nb_cols;
      const std::int64_t row0 = br * p.block_rows, c0 = bc * 128;
      const int nr = static_cast<int>(p.block_rows < p.rows - row0 ? p.block_rows : p.rows - row0);
      const int nc = static_cast<int>(128 < p.cols - c0 ? 128 : p.cols - c0);
      const unsigned row_bytes = static_cast<unsigned>(nc) * 4u;
      if (lane == 0) platform::mbar_arrive_expect_tx(&full[s], static_cast<unsigned>(nr) * row_bytes);
      platform::sync_warp();
      float4* stage = ring + s * 128 * 32;
      for (int r = lane; r < nr; r += 32)
        platform::bulk_copy_g2s<EvictFirst>(stage + r * 32, p.x + (row0 + r) * p.cols + c0, row_bytes, &full[s]);
    }
    return;
  }
  const int cq = threadIdx.x % 32, rg = threadIdx.x / 32;
  const bool aligned = (p.cols & 3) == 0;
  int k = 0;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x, ++k) {
    const int s = k % Stages;
    const std::int64_t br = t / p.nb_cols, bc = t - br * p.nb_cols;
    const std::int64_t row0 = br * p.block_rows, c0 = bc * 128 + cq * 4;
    const std::int64_t nr = p.block_rows < p.rows - row0 ? p.block_rows : p.rows - row0;
    const bool col_ok = c0 < p.cols;
    const float4* stage = ring + s * 128 * 32;
    platform::mbar_wait(&full[s], static_cast<unsigned>((k / Stages) & 1));
    float amax = 0.f;
    float4 v[R];
#pragma unroll
    for (int i = 0; i < R; ++i) v[i] = stage[(rg + groups * i) * 32 + cq];
    platform::sync_warp();
    if (cq == 0) platform::mbar_arrive(&empty[s]);
    // |v| max over the finite values (one max per element, see finite_amax); masked entries 0.
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float4 q = v[i];
      const bool ok = col_ok && rg + groups * i < nr;
      const float m = fmaxf(fmaxf(std::fabs(q.x), std::fabs(q.y)), fmaxf(std::fabs(q.z), std::fabs(q.w)));
      amax = fmaxf(amax, ok ? m : 0.f);
    }
    if (!(amax <= 3.4028235e38f)) {
      amax = 0.f;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const float4 q = v[i];
        if (!(col_ok && rg + groups * i < nr)) continue;
        const float a[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (is_finite_f(a[j])) amax = fmaxf(amax, std::fabs(a[j]));
      }
    }
    // Max over the consumers: warp shuffles, then one named barrier; red[] alternates between
    // tiles so that a fast warp's next write cannot meet a slow warp's read.
#pragma unroll
    for (int m = 1; m < platform::warp_size; m <<= 1) amax = fmaxf(amax, platform::shfl_xor(amax, m));
    if (cq == 0) red[k & 1][rg] = amax;
    platform::named_barrier_sync(1, Consumers);
    amax = red[k & 1][0];
#pragma unroll
    for (int w = 1; w < groups; ++w) amax = fmaxf(amax, red[k & 1][w]);
    std::uint32_t scode = 0;
    const block_coder b = make_coder<quant_kind::m_block2d, quant_elem::m_e4m3>(p, amax, 1.f, 0.f, scode);
    if (threadIdx.x == 0) store_scale_code(p, t, scode);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int lr = rg + groups * i;
      if (!col_ok || lr >= nr) continue;
      const float4 q = v[i];
      const float in4[4] = {q.x, q.y, q.z, q.w};
      std::uint32_t c[4];
      encode4<quant_kind::m_block2d, quant_elem::m_e4m3, true>(p, b, in4, c);
      store_codes4(p, row0 + lr, c0, c, aligned);
    }
  }
}

}  // namespace numprobe::gpu::quant
