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
// Hopper's warpgroup wgmma (sm_90 only) with both operands in shared memory (SS), or with A
// from registers (RS, as FlashAttention-3's P.V; fp32 accumulators).
enum class mma_family : std::uint8_t { m_mma_sync, m_wgmma, m_wgmma_rs };

// The accumulator (C and D) of a probe path: fp32, fp16, or s32 (integer inputs), wrapping or
// clamped (.satfinite).
enum class mma_accumulator : std::uint8_t { m_f32, m_f16, m_s32, m_s32_satfinite };

[[nodiscard]] const char* mma_accumulator_name(mma_accumulator a);  // f32, f16, s32, s32.satfinite

// One probe instruction: family, A/B element format, K and accumulator.
struct mma_instruction {
  mma_family family = mma_family::m_mma_sync;
  formats::format_id input = formats::format_id::m_bf16;
  int k = 16;
  mma_accumulator accumulator = mma_accumulator::m_f32;
};

struct mma_device_info {
  int ordinal = 0;
  std::string name;
  int arch = 0;  // 90 for sm_90
};

// True when this build has the probe kernels (CUDA).
[[nodiscard]] bool mma_device_built();

[[nodiscard]] mma_device_info mma_device(int ordinal);

// "" when a device of compute capability `arch` runs the instruction, else why not ("needs
// sm_89 or newer", ...): the probe kernels' own rule.
[[nodiscard]] std::string mma_device_unsupported(const mma_instruction& op, int arch);

// One output per dot product through the instruction (f16/bf16 k16, tf32 k8, e4m3/e5m2 k32 with
// fp32 accumulators; f16 k16 and e4m3/e5m2 k32 with fp16 ones; i8 k32 with s32; an input error
// for other combinations): a and b hold count * k values (exact in the input format), c holds
// count accumulator values (fp32, fp16 or s32 values).
[[nodiscard]] std::vector<double> run_mma_on_device(int ordinal, const mma_instruction& op, std::span<const double> a,
                                                    std::span<const double> b, std::span<const double> c);

}  // namespace numprobe::providers
