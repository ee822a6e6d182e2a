// The launch variants of quant_variants.hpp over the library's kernels (and the bench-only
// pipelined tile kernel), run through the library's buffers and timing (quantize_with,
// bandwidth_with). CUDA only.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "bench/gpu_quant/block2d_pipe.cuh"
#include "bench/gpu_quant/quant_variants.hpp"
#include "src/kernels/gpu/quantize_launch.cuh"

namespace numprobe::bench::gpu_quant {
namespace {

using gpu::quant_kind;
using gpu::quant::params;
namespace platform = gpu::platform;
namespace quant = gpu::quant;

// Compute capability major of the current device (0 when unknown).
int cc_major() {
  static int major = [] {
    int dev = 0;
    (void)NUMPROBE_GPU_API(GetDevice)(&dev);
    platform::device_prop_t prop{};
    if (NUMPROBE_GPU_API(GetDeviceProperties)(&prop, dev) != platform::success) return 0;
    return prop.major;
  }();
  return major;
}

// Persistent pipelined tiles: as many blocks as are resident (at most one per tile). False when
// the platform, the device or the layout does not allow bulk copies (the caller falls back).
template <int Consumers, int Stages, int MinBlocks, bool EvictFirst>
bool launch_block2d_pipe(const params& p) {
  if constexpr (platform::has_bulk_copy) {
    if (cc_major() < 9 || (p.cols & 3) != 0 || (reinterpret_cast<std::uintptr_t>(p.x) & 15) != 0) return false;
    constexpr int smem = quant::pipe_smem_bytes<Stages>;
    auto* kernel = &quant::quantize_block2d_pipe<Consumers, Stages, MinBlocks, EvictFirst>;
    NUMPROBE_GPU_CHECK(FuncSetAttribute, reinterpret_cast<const void*>(kernel),
                       platform::func_attr_max_dynamic_smem, smem);
    const std::int64_t tiles = p.nb_cols * ((p.rows + p.block_rows - 1) / p.block_rows);
    const std::int64_t grid = std::min<std::int64_t>(
        tiles, static_cast<std::int64_t>(quant::resident_blocks(kernel, Consumers + 32, smem, MinBlocks)) *
                   quant::multiprocessors());
    kernel<<<static_cast<unsigned>(std::max<std::int64_t>(grid, 1)), Consumers + 32, smem>>>(p);
    return true;
  }
  return false;
}

// 128x128 (block_rows x 128) tiles, variants 1..8; false for the library's launch.
template <int V>
bool launch_tile_variant(const params& p) {
  const dim3 grid = quant::tile_grid(p);
  bool done = true;
  if constexpr (V == 1) quant::quantize_block2d<512><<<grid, 512>>>(p);
  else if constexpr (V == 2) quant::launch_block2d_smem<512, 3, false>(p, grid);
  else if constexpr (V == 3) quant::launch_block2d_smem<1024, 2>(p, grid);
  else if constexpr (V == 4) quant::quantize_block2d<512, true><<<grid, 512>>>(p);
  else if constexpr (V == 5) done = launch_block2d_pipe<512, 3, 1, false>(p);
  else if constexpr (V == 6) done = launch_block2d_pipe<512, 1, 2, false>(p);
  else if constexpr (V == 7) done = launch_block2d_pipe<512, 1, 2, true>(p);
  else if constexpr (V == 8) done = launch_block2d_pipe<512, 3, 1, true>(p);
  else done = false;
  if (done) gpu::check_launch("quantize_block2d");
  return done;
}

// Row blocks (and per-tensor fp8), variants 1..4; false for the library's launch.
template <int V>
bool launch_row_variant(const params& p) {
  if constexpr (V >= 1 && V <= 4) {
    quant::dispatch_rows(p, [](auto shape, const params& q) {
      using S = decltype(shape);
      if constexpr (V == 1) quant::launch_rows_regs<S::lanes, S::kind, S::elem>(q);
      else quant::launch_rows_fast<S::lanes, S::kind, S::elem, V + 2>(q);  // 4, 5, 6 blocks per SM
    });
    return true;
  }
  return false;
}

template <int V>
void launch_variant(const params& p) {
  const bool done = p.kind == quant_kind::m_block2d ? launch_tile_variant<V>(p) : launch_row_variant<V>(p);
  if (!done) quant::launch_quantize(p);
}

quant::launch_fn launcher(int variant) {
  static constexpr quant::launch_fn table[n_variants] = {
      &launch_variant<0>, &launch_variant<1>, &launch_variant<2>, &launch_variant<3>, &launch_variant<4>,
      &launch_variant<5>, &launch_variant<6>, &launch_variant<7>, &launch_variant<8>, &launch_variant<9>};
  if (variant < 0 || variant >= n_variants)
    throw std::out_of_range("launch variant " + std::to_string(variant) + " (expects 0..9)");
  return table[variant];
}

}  // namespace

gpu::quant_device_result quantize_variant(int variant, const gpu::quant_request& r) {
  return quant::quantize_with(r, launcher(variant));
}

gpu::quant_bandwidth bandwidth_variant(int variant, const gpu::quant_request& shape, std::int64_t bytes,
                                       int iters) {
  return quant::bandwidth_with(shape, bytes, iters, launcher(variant));
}

}  // namespace numprobe::bench::gpu_quant
