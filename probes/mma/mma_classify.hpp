#pragma once
// The classifier of `numprobe mma` (issue 31; docs/hardware.md): given the catalogue's
// vectors and the outputs an MMA path produced for them, says for each property which
// hypothesis matches, with the evidence (inputs, the output each hypothesis predicts, the
// measured output). Predictions are closed forms written here for the catalogue's structured
// vectors, independent of the models in src/kernels/emu (tests feed a model's outputs as the
// measurement and require its parameters back).
#include <optional>
#include <string>
#include <vector>

#include "probes/mma/mma_catalogue.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::probes {

struct mma_hypothesis {
  std::string label;               // e.g. F=13, toward-zero, P=23 nearest-even
  std::vector<double> predicted;   // one per vector of the property
};

struct mma_property {
  std::string name;       // products, fraction_bits, ...
  std::string question;   // what it answers, one line
  std::vector<mma_vector> vectors;
  std::vector<double> measured;
  std::vector<mma_hypothesis> hypotheses;
  std::vector<std::string> matching;  // labels of the hypotheses every measured output matches
  std::string verdict;                // the finding, or why it is inconclusive
  bool determined = false;            // exactly one hypothesis matched
};

// The parameters recovered; empty where the vectors could not decide.
struct mma_findings {
  std::optional<bool> products_exact;
  std::optional<int> fraction_bits;
  int fraction_bits_at_least = -1;  // when every j kept: the sweep's end
  std::optional<emu::mma_rounding> internal_rounding;
  std::optional<int> output_fraction_bits;
  std::optional<emu::mma_rounding> output_rounding;
  std::optional<int> k_group;  // 2 stands for "2 or fewer"
  std::optional<bool> c_in_group;
  std::optional<bool> flush_subnormal_inputs;
  std::optional<bool> flush_subnormal_output;  // from a subnormal product, else from a subnormal C
  std::optional<bool> ieee_nonfinite;
  std::optional<bool> overflow_to_inf;
  // Integer paths: the s32 result on overflow (k_wraps, k_clamped_once, or clamping along the
  // way, which no model describes).
  std::optional<std::string> integer_overflow;
};

inline constexpr const char* k_wraps = "wraps modulo 2^32";
inline constexpr const char* k_clamped_once = "clamped once, at the end";

struct mma_characterisation {
  mma_path path;
  std::vector<mma_property> properties;
  mma_findings findings;
};

// `measured` has one output per vector of `vectors` (the catalogue of `path`, in its order).
[[nodiscard]] mma_characterisation mma_classify(const mma_path& path, const std::vector<mma_vector>& vectors,
                                                const std::vector<double>& measured);

// x rounded to `bits` fraction bits below its leading bit (exponents floored at min_exponent:
// fp32's -126, fp16's -14, for subnormals) under `mode`: the closed form the predictions use.
[[nodiscard]] double mma_round_bits(double x, int bits, emu::mma_rounding mode, int min_exponent = -126);

}  // namespace numprobe::probes
