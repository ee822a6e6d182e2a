#pragma once
// `--backend hip`: the same kernel sources compiled by hipcc, on an AMD GPU. Uses the
// vendor-neutral provider of cuda_provider.hpp with gpu::hip_api().
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "src/providers/provider.hpp"

namespace numprobe {

void register_hip_provider();
[[nodiscard]] std::unique_ptr<attention_provider> make_hip_provider(const provider_options& o);
[[nodiscard]] std::vector<nlohmann::json> hip_devices();

}  // namespace numprobe
