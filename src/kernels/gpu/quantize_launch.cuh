#pragma once
// Host launchers of the quantize kernels: grid sizes from the occupancy the runtime reports, the
// dispatch from a runtime scheme to a kernel instantiation, and the production choice of kernel
// per platform (launch_quantize). The choice is made at compile time from the platform header:
// where asynchronous copies exist (CUDA) the rows take quantize_rows_fast and the 128x128 tiles
// quantize_block2d_smem; elsewhere (HIP) quantize_rows and quantize_block2d. Other launch
// variants, measured and rejected, are in bench/gpu_quant; they reach the buffers and timing of
// quantize.cu through quantize_with / bandwidth_with.
#include <algorithm>
#include <cstdint>

#include "src/kernels/gpu/gpu_check.cuh"
#include "src/kernels/gpu/quantize_row_kernels.cuh"
#include "src/kernels/gpu/quantize_tile_kernels.cuh"

namespace numprobe::gpu::quant {

inline int multiprocessors() {
  static int n = [] {
    int dev = 0;
    (void)NUMPROBE_GPU_API(GetDevice)(&dev);
    platform::device_prop_t prop{};
    if (NUMPROBE_GPU_API(GetDeviceProperties)(&prop, dev) != platform::success) return 132;
    return prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 132;
  }();
  return n;
}

// Resident blocks per SM of a kernel at `threads` threads and `smem` dynamic bytes (`fallback`
// when the runtime does not say).
template <class Kernel>
int resident_blocks(Kernel kernel, int threads, int smem, int fallback) {
  int resident = 0;
  if (NUMPROBE_GPU_API(OccupancyMaxActiveBlocksPerMultiprocessor)(&resident, kernel, threads, smem) !=
          platform::success || resident < 1)
    resident = fallback;
  return resident;
}

// A row kernel's compile-time shape: L lanes per block of 16 L elements, scheme K, element E.
template <int L, quant_kind K, quant_elem E>
struct row_shape {
  static constexpr int lanes = L;
  static constexpr quant_kind kind = K;
  static constexpr quant_elem elem = E;
  // quantize_rows_fast's blocks per SM: 5 (48 registers), 4 for the e2m1 schemes (NVFP4, MX
  // e2m1: 64 registers; at 5 they spill and run slower).
  static constexpr int fast_min_blocks =
      K == quant_kind::m_nvfp4 || (K == quant_kind::m_mx && E == quant_elem::m_e2m1) ? 4 : 5;
};

template <int L, quant_kind K, quant_elem E, int MinBlocks>
void launch_rows_fast(const params& p) {
  auto* kernel = &quantize_rows_fast<L, K, E, MinBlocks>;
  const std::int64_t per_block = 256 / L;  // blocks (of the scheme) per thread block and step
  const std::int64_t full = (p.n_blocks + per_block - 1) / per_block;
  const std::int64_t grid = std::min<std::int64_t>(
      full, static_cast<std::int64_t>(resident_blocks(kernel, 256, 0, MinBlocks)) * multiprocessors() * 4);
  kernel<<<static_cast<unsigned>(std::max<std::int64_t>(grid, 1)), 256>>>(p);
  check_launch("quantize_rows_fast");
}

template <int L, quant_kind K, quant_elem E>
void launch_rows_regs(const params& p) {
  const std::int64_t per_block = 256 / L;  // blocks (of the scheme) per thread block
  const std::int64_t full = (p.n_blocks + per_block - 1) / per_block;
  const int resident = resident_blocks(quantize_rows<L, K, E>, 256, 0, 4);
  const std::int64_t grid = std::min<std::int64_t>(full, static_cast<std::int64_t>(resident) * multiprocessors() * 4);
  quantize_rows<L, K, E><<<static_cast<unsigned>(std::max<std::int64_t>(grid, 1)), 256>>>(p);
  check_launch("quantize_rows");
}

template <quant_kind K, quant_elem E, class Launch>
void dispatch_lanes(const params& p, Launch&& launch) {
  switch (p.block_cols) {  // 16 elements per lane
    case 16: launch(row_shape<1, K, E>{}, p); break;
    case 32: launch(row_shape<2, K, E>{}, p); break;
    case 64: launch(row_shape<4, K, E>{}, p); break;
    default: launch(row_shape<8, K, E>{}, p); break;
  }
}

// Calls launch(row_shape<L, K, E>{}, q) for the scheme of a row-block request; q is p with the
// per-tensor scheme's launch blocks of 128.
template <class Launch>
void dispatch_rows(const params& p, Launch&& launch) {
  using K = quant_kind;
  using E = quant_elem;
  params q = p;
  if (q.kind == K::m_tensor) q.block_cols = 128;
  switch (q.kind) {
    case K::m_tensor: launch(row_shape<8, K::m_tensor, E::m_e4m3>{}, q); break;
    case K::m_nvfp4: dispatch_lanes<K::m_nvfp4, E::m_e2m1>(q, launch); break;
    case K::m_asym: dispatch_lanes<K::m_asym, E::m_u4>(q, launch); break;
    case K::m_mx:
      if (q.elem == E::m_e2m1) dispatch_lanes<K::m_mx, E::m_e2m1>(q, launch);
      else dispatch_lanes<K::m_mx, E::m_e4m3>(q, launch);
      break;
    default:
      if (q.elem == E::m_i4) dispatch_lanes<K::m_row_block, E::m_i4>(q, launch);
      else dispatch_lanes<K::m_row_block, E::m_e4m3>(q, launch);
      break;
  }
}

// One thread block per tile: (column tiles, row tiles).
inline dim3 tile_grid(const params& p) {
  return dim3(static_cast<unsigned>(p.nb_cols), static_cast<unsigned>((p.rows + p.block_rows - 1) / p.block_rows));
}

template <int Threads, int MinBlocks, bool Whole = true>
void launch_block2d_smem(const params& p, dim3 grid) {
  if constexpr (platform::has_async_copy) {
    constexpr int smem = tile_smem_bytes;
    auto* kernel = &quantize_block2d_smem<Threads, MinBlocks, Whole>;
    NUMPROBE_GPU_CHECK(FuncSetAttribute, reinterpret_cast<const void*>(kernel),
                       platform::func_attr_max_dynamic_smem, smem);
    kernel<<<grid, Threads, smem>>>(p);
  }
}

// The production tile launch: 3 tiles of 64 KiB resident per SM in shared memory, or the
// register tile where asynchronous copies do not exist. A template, so that the kernel of the
// other platform is not instantiated.
template <int THREADS>
void launch_tiles(const params& p) {
  if constexpr (platform::has_async_copy) launch_block2d_smem<THREADS, 3>(p, tile_grid(p));
  else quantize_block2d<THREADS><<<tile_grid(p), THREADS>>>(p);
  check_launch("quantize_block2d");
}

// The production launch of the quantize kernel for p (after the tensor pre-pass, if any).
inline void launch_quantize(const params& p) {
  if (p.kind == quant_kind::m_block2d) {
    launch_tiles<512>(p);
  } else if (p.kind == quant_kind::m_nvfp4 && !p.nv.is_default()) {
    // NVFP4 under non-default conventions: quantize_rows, whose make_coder forms each block's
    // scale and thresholds by the convention (the fast kernel's threshold table is the
    // definition's), so the default kernels are unchanged.
    dispatch_lanes<quant_kind::m_nvfp4, quant_elem::m_e2m1>(p, [](auto shape, const params& q) {
      using S = decltype(shape);
      launch_rows_regs<S::lanes, S::kind, S::elem>(q);
    });
  } else {
    dispatch_rows(p, [](auto shape, const params& q) {
      using S = decltype(shape);
      if constexpr (platform::has_async_copy)
        launch_rows_fast<S::lanes, S::kind, S::elem, S::fast_min_blocks>(q);
      else
        launch_rows_regs<S::lanes, S::kind, S::elem>(q);
    });
  }
}

// The buffers, tensor pre-pass and timing of quantize.cu around another launch of the quantize
// kernel (bench/gpu_quant's variants; `launch` must code the same bits as launch_quantize).
using launch_fn = void (*)(const params&);
quant_device_result quantize_with(const quant_request& r, launch_fn launch);
quant_bandwidth bandwidth_with(const quant_request& shape, std::int64_t bytes, int iters, launch_fn launch);

}  // namespace numprobe::gpu::quant
