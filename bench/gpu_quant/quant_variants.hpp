#pragma once
// Launch variants of the GPU quantize kernels (quant_variants.cu), for gpu_quant_bench only: the
// library launches one kernel per scheme and platform (src/kernels/gpu/quantize_launch.cuh); these
// are the alternatives it was measured against. Every variant codes the same bits.
//   rows: 0 the library's launch (quantize_rows_fast at 5 blocks of 256 per SM, 4 for NVFP4 and
//         MX e2m1); 1 quantize_rows (the default before 2026-11-30, the same-run baseline);
//         2, 3, 4 quantize_rows_fast at 4, 5, 6 blocks per SM; 5..9 as 0.
//   2D:   0 the library's launch (quantize_block2d_smem<512>, 3 tiles per SM, whole tiles without
//         per-row bounds tests); 1 quantize_block2d<512> (registers: the baseline, and the HIP
//         kernel); 2 quantize_block2d_smem<512, 3, false> (every tile by the general path: the
//         default before the whole-tile path); 3 quantize_block2d_smem<1024> (2 tiles per SM);
//         4 quantize_block2d<512, Fast> (registers); quantize_block2d_pipe where bulk copies work
//         (sm_90+, cols % 4 == 0; else as 0), all slower than 0 on the H200 (0.47-0.56 of the
//         copy against 0.62, docs/measurements/h200_quant_bandwidth_2026-11-30.txt, runs 7-8):
//         5 <512 consumers, 3 stages, 1 block per SM>, 6 <512, 1 stage, 2 blocks per SM>, 7 = 6
//         and 8 = 5 with the tile loads marked evict-first in L2; 9 as 0.
#include <cstdint>

#include "src/kernels/gpu/gpu_api.hpp"

namespace numprobe::bench::gpu_quant {

inline constexpr int n_variants = 10;

// As cuda_quant_api().quantize / .bandwidth with launch variant `variant` (0..9; 0 is the
// library's own launch). Throw numprobe::error as those do, std::out_of_range for a variant
// outside 0..9.
gpu::quant_device_result quantize_variant(int variant, const gpu::quant_request& r);
gpu::quant_bandwidth bandwidth_variant(int variant, const gpu::quant_request& shape, std::int64_t bytes,
                                       int iters);

}  // namespace numprobe::bench::gpu_quant
