#pragma once
// `numprobe mma` (issue 31; docs/hardware.md): the catalogue run on each path of a device's
// probe kernels, or on a CPU model (--model), classified, with its evidence as JSON.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "probes/mma/mma_agreement.hpp"
#include "probes/mma/mma_catalogue.hpp"
#include "probes/mma/mma_classify.hpp"

namespace numprobe::probes {

struct mma_run_options {
  std::optional<std::string> model;  // a named model of src/kernels/emu instead of the device
  int device = 0;
  // --agree N: N random and adversarial dot products per path, through the device (or --model)
  // and through the measured model (and the published one for the path), bit for bit.
  int agree = 0;
  std::uint64_t seed = 1;
};

struct mma_run_result {
  std::string source;  // "model h200-wgmma-e4m3 (...)" or "device 0: NVIDIA H200 (sm_90)"
  std::vector<mma_characterisation> paths;
  std::vector<std::string> skipped;  // "path: why"
  std::vector<mma_agreement> agreement;  // --agree: one per (path, model compared)
  std::vector<std::string> no_model;     // --agree: "path: why no measured model"
  // Whether every measured model agreed with the outputs it was compared with (exit 1 if not).
  [[nodiscard]] bool measured_models_agree() const;
};

// The published (named) model of the instruction a device path runs, on a device of arch `sm`
// ("" when the table has none): Hopper's mma.sync entries on sm_90 and later (fp8: measured on
// an H200), Ampere's f16/bf16 and Ada's e4m3 before.
[[nodiscard]] std::string published_model_for(const mma_path& path, int sm);

// Throws an input error for an unknown model (exit 2), a backend error when there is no GPU
// build or no device (exit 3).
[[nodiscard]] mma_run_result run_mma(const mma_run_options& o);

// The result with every vector, prediction and measurement (NaN and Inf as "nan", "inf", "-inf").
[[nodiscard]] nlohmann::json mma_result_json(const mma_run_result& r);

// `mma --run-vectors FILE`: the vectors of a document in --emit-vectors' layout ({"paths": [{"path",
// "input", "k", "vectors": [{"id", "a", "b", "c"}]}]}, NaN/Inf as strings) run through the device
// path of the same input format and k (or through --model), each vector's output added as
// "measured". Throws an input error naming the vector for a value that is not of the input
// format, a length other than k, an unknown path, or more than 1,000,000 vectors.
[[nodiscard]] nlohmann::json run_mma_vectors(const nlohmann::json& doc, const mma_run_options& o,
                                             const std::string& place);

// The catalogue of each path (inputs only), for other implementations to run (bench/mma_torch.py).
[[nodiscard]] nlohmann::json mma_vectors_json(const std::vector<mma_path>& paths);

}  // namespace numprobe::probes
