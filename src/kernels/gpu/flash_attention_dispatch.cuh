#pragma once
// Turns the run-time (head_dim, faults, path) of a request into a compiled kernel, and fails
// loudly (an input error naming the field) on a combination that was not compiled.
#include <cstdint>
#include <string>

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/flash_attention.cuh"
#include "src/kernels/gpu/gpu_check.cuh"

namespace numprobe::gpu {

// Tile shapes, reported to probes (provider tiles()) so drift sweeps use the real tile.
inline constexpr int k_mma_warps = 8;
inline constexpr int k_mma_tile_q = 16 * k_mma_warps;
inline constexpr int k_mma_tile_k = 64;
inline constexpr int k_scalar_tile_q = 64;
inline constexpr int k_scalar_tile_k = 64;

template <class T, int D, std::uint32_t F>
void launch_flash(const flash_params<T>& p, attention_path path, platform::stream_t stream) {
  if (path == attention_path::m_mma) {
    if constexpr (platform::has_mma_sync) {
      constexpr int smem = (k_mma_tile_q + 2 * k_mma_tile_k) * D * static_cast<int>(sizeof(T));
      auto* kernel = &flash_forward_mma<T, D, k_mma_tile_k, k_mma_warps, F>;
      NUMPROBE_GPU_CHECK(FuncSetAttribute, reinterpret_cast<const void*>(kernel),
                         platform::func_attr_max_dynamic_smem, smem);
      kernel<<<dim3(p.n_qtiles, p.hq, p.batch), k_mma_warps * platform::warp_size, smem,
               stream>>>(p);
      check_launch("flash_forward_mma");
    } else {
      throw_input_error("path", "this platform has no mma.sync tensor-core path; use the scalar path");
    }
  } else {
    flash_forward_scalar<T, D, k_scalar_tile_q, k_scalar_tile_k, F>
        <<<dim3(p.n_qtiles, p.hq, p.batch), k_scalar_tile_q, 0, stream>>>(p);
    check_launch("flash_forward_scalar");
  }
}

template <class T, int D>
void launch_by_fault(const flash_params<T>& p, std::uint32_t faults, attention_path path,
                     platform::stream_t stream) {
  switch (faults) {
    case k_fault_none: return launch_flash<T, D, k_fault_none>(p, path, stream);
    case k_fault_skip_rescale: return launch_flash<T, D, k_fault_skip_rescale>(p, path, stream);
    case k_fault_stale_max: return launch_flash<T, D, k_fault_stale_max>(p, path, stream);
    case k_fault_rowsum_bf16: return launch_flash<T, D, k_fault_rowsum_bf16>(p, path, stream);
    case k_fault_acc_bf16: return launch_flash<T, D, k_fault_acc_bf16>(p, path, stream);
    case k_fault_mask_top_left: return launch_flash<T, D, k_fault_mask_top_left>(p, path, stream);
    case k_fault_no_empty_guard: return launch_flash<T, D, k_fault_no_empty_guard>(p, path, stream);
    case k_fault_drop_tail_tile: return launch_flash<T, D, k_fault_drop_tail_tile>(p, path, stream);
    case k_fault_finite_sentinel:
      return launch_flash<T, D, k_fault_finite_sentinel>(p, path, stream);
    default:
      throw_input_error("--inject", "the GPU kernels compile one fault per variant; inject at most one");
  }
}

// Head dims compiled: 128 (every fault variant) and 64 (fault-free only). The run-time address
// faults (gqa-mod, index-wrap) run on the fault-free variant at either head dim.
template <class T>
void dispatch_flash(const flash_params<T>& params, int head_dim, std::uint32_t faults,
                    attention_path path, platform::stream_t stream) {
  if ((faults & k_fault_empty_split_nan) != 0)
    throw_input_error("--inject", std::string(kernels::to_string(kernels::fault::m_empty_split_nan)) +
                                      " is a split-KV decode fault; add --decode");
  flash_params<T> p = params;
  p.runtime_faults = faults & k_runtime_faults;
  faults &= ~k_runtime_faults;
  if (p.runtime_faults != 0 && (faults != k_fault_none || (p.runtime_faults & (p.runtime_faults - 1)) != 0))
    throw_input_error("--inject", "the GPU kernels take one fault at a time; inject one");
  switch (head_dim) {
    case 128: return launch_by_fault<T, 128>(p, faults, path, stream);
    case 64:
      if (faults != k_fault_none)
        throw_input_error("--inject", "GPU fault variants are compiled for head_dim 128 only (" +
                                          kernels::fault_names(kernels::k_gpu_forward, k_runtime_faults) +
                                          " run at 64 too)");
      return launch_flash<T, 64, k_fault_none>(p, path, stream);
    default:
      throw_input_error("head_dim", "the GPU attention kernels are compiled for D = 64 and 128, not " +
                                        std::to_string(head_dim));
  }
}

}  // namespace numprobe::gpu
