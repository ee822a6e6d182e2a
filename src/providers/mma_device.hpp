#pragma once
// The device behind `numprobe mma` (issue 31): runs designed dot products through a tensor-core
// instruction of numprobe's own probe kernels (src/kernels/gpu/mma_probe.cu, wgmma_probe.cu). A
// build without CUDA throws a backend error (exit 3) saying that the command needs a GPU build.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "numprobe/formats/format.hpp"

namespace numprobe::providers {

// The instruction family of a probe path: the warp-level mma.sync (sm_80+; fp8 sm_89+) or
// Hopper's warpgroup wgmma (sm_90 only), both with fp32 accumulation.
enum class mma_family : std::uint8_t { m_mma_sync, m_wgmma };

struct mma_device_info {
  int ordinal = 0;
  std::string name;
  int arch = 0;  // 90 for sm_90
};

// True when this build has the probe kernels (CUDA).
[[nodiscard]] bool mma_device_built();

[[nodiscard]] mma_device_info mma_device(int ordinal);

// "" when a device of compute capability `arch` runs the family's instruction for the input
// format and K, else why not ("needs sm_89 or newer", ...): the probe kernels' own rule.
[[nodiscard]] std::string mma_device_unsupported(mma_family family, formats::format_id input, int k, int arch);

// One output per dot product through the family's instruction for the input format and K (f16/bf16
// k16, tf32 k8, e4m3/e5m2 k32; an input error for other pairs): a and b hold count * k values
// (exact in the input format), c holds count fp32 values.
[[nodiscard]] std::vector<double> run_mma_on_device(int ordinal, mma_family family, formats::format_id input, int k,
                                                    std::span<const double> a, std::span<const double> b,
                                                    std::span<const double> c);

}  // namespace numprobe::providers
