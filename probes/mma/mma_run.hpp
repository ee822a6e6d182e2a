#pragma once
// `numprobe mma` (issue 31; docs/hardware.md): the catalogue run on each path of a device's
// probe kernels, or on a CPU model (--model), classified, with its evidence as JSON.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "probes/mma/mma_catalogue.hpp"
#include "probes/mma/mma_classify.hpp"

namespace numprobe::probes {

struct mma_run_options {
  std::optional<std::string> model;  // a named model of src/kernels/emu instead of the device
  int device = 0;
};

struct mma_run_result {
  std::string source;  // "model h200-wgmma-e4m3 (...)" or "device 0: NVIDIA H200 (sm_90)"
  std::vector<mma_characterisation> paths;
  std::vector<std::string> skipped;  // "path: why"
};

// Throws an input error for an unknown model (exit 2), a backend error when there is no GPU
// build or no device (exit 3).
[[nodiscard]] mma_run_result run_mma(const mma_run_options& o);

// The result with every vector, prediction and measurement (NaN and Inf as "nan", "inf", "-inf").
[[nodiscard]] nlohmann::json mma_result_json(const mma_run_result& r);

// The catalogue of each path (inputs only), for other implementations to run (bench/mma_torch.py).
[[nodiscard]] nlohmann::json mma_vectors_json(const std::vector<mma_path>& paths);

}  // namespace numprobe::probes
