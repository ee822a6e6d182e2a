#pragma once
// A path's measured model, and its agreement with the device (issue 31, item 2): the findings of
// the catalogue (mma_classify.hpp) make a bit-accurate CPU model (src/kernels/emu/mma_model.hpp)
// when every parameter the model needs was determined; then random and adversarial dot products
// run through the device and through the model, and every output is compared bit for bit.
// A published model (a named entry of the table) is compared the same way.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probes/mma/mma_catalogue.hpp"
#include "probes/mma/mma_classify.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::probes {

// The model the findings describe, or nullopt with `why` naming the parameters left undetermined.
[[nodiscard]] std::optional<emu::mma_model> model_from_findings(const mma_path& path, const mma_findings& f,
                                                                std::string& why);

// `count` dot products for the path, seeded: four families in turn (docs/hardware.md):
//   random     every a, b a random value of the format (exponents within +-8, any fraction),
//              C random fp32 or zero;
//   cancel     pairs x, -x at random positions and a few small terms: the alignment's bits;
//   spread     exponents over the format's range (within +-40): alignment and the output's rounding;
//   subnormal  some inputs subnormal in the format, the others near its smallest normal
//              exponent, small C: flushing.
// Every value is a value of the format (inputs) or of fp32 (C).
[[nodiscard]] std::vector<mma_vector> mma_random_vectors(const mma_path& path, int count, std::uint64_t seed);

struct mma_disagreement {
  mma_vector vector;
  double device = 0.0, model = 0.0;
};

struct mma_agreement {
  std::string path;
  std::string model;  // "measured" or a named model
  std::string model_text;  // the model's parameters, one line
  std::size_t vectors = 0, equal = 0;
  std::vector<std::pair<std::string, std::pair<std::size_t, std::size_t>>> families;  // name -> (equal, of)
  std::vector<mma_disagreement> first;  // the first few disagreements, with their inputs
};

// Compares `device` (one output per vector) with `model` on `vectors`: equal means the same
// fp32 bits (any NaN equals any NaN: the payload is not part of the model).
[[nodiscard]] mma_agreement compare_with_model(const mma_path& path, const std::vector<mma_vector>& vectors,
                                               const std::vector<double>& device, const emu::mma_model& model,
                                               std::string label);

// One line: "F=25 toward-zero, k_group=16, C in group, output P=23 toward-zero, exact products, ...".
[[nodiscard]] std::string describe_model(const emu::mma_model& m);

}  // namespace numprobe::probes
