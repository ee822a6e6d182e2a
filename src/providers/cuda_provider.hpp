#pragma once
// `--backend cuda`: the built-in flash-attention kernels (src/kernels/gpu/) on an NVIDIA GPU.
// The provider class itself is vendor-neutral (written against gpu::backend_api); hip_provider
// reuses it with hip_api().
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "src/providers/provider.hpp"

namespace numprobe {
namespace gpu {
struct backend_api;
}

// Registers "cuda" with the provider registry (called by providers/registry.cpp).
void register_cuda_provider();
// The cuda provider for these options; throws a backend error (exit 3) when the build has no
// CUDA or there is no device, an input error (exit 2) for options the kernels cannot honour.
[[nodiscard]] std::unique_ptr<attention_provider> make_cuda_provider(const provider_options& o);
// One JSON object per visible CUDA device (name, arch, warp width, memory, driver...); empty
// when the build has no CUDA or no device is visible. For `numprobe backends`.
[[nodiscard]] std::vector<nlohmann::json> cuda_devices();

// Shared by the cuda and hip providers.
[[nodiscard]] std::unique_ptr<attention_provider> make_gpu_attention_provider(
    const gpu::backend_api& api, const provider_options& o);
[[nodiscard]] std::vector<nlohmann::json> gpu_devices(const gpu::backend_api& api);

}  // namespace numprobe
