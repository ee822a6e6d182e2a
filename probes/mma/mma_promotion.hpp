#pragma once
// The promotion interval of a limited-precision MMA accumulator (issue 31, item 3): long dot
// products computed the way an fp8 GEMM or attention kernel chains its MMA instructions, under a
// named bit-accurate model (src/kernels/emu/mma_model.hpp), against the exact sum.
//
// One dot product of length K is K / k MMA instructions of the model; each takes the running
// accumulator as its C and writes it back in the model's output precision (13 fraction bits for
// Hopper wgmma fp8: e8m13). Promotion every N instructions adds the accumulator into an fp32
// register (one IEEE fp32 addition, round to nearest) and restarts it at zero: DeepSeek-V3's
// fix (every 4 wgmma of K = 32, i.e. 128 elements; arXiv 2412.19437, section 3.3.2) and the
// two-level accumulation of vllm-project/flash-attention #104. N = 0: never promoted.
//
// Inputs: a and b drawn as N(0, 1), or |N(0, 1)| ("positive": every product adds, as in P·V
// where P >= 0 and V of one sign, the case that truncation hurts most), scaled per vector so its
// largest magnitude is the format's largest finite value (per-tensor scaling as fp8 GEMMs do)
// and rounded to the model's input format (nearest even). The exact dot product of the rounded
// values is the reference: products of fp8 values are exact in double, and the sum is
// accumulated in double with compensation (error far below fp32's).
#include <cstdint>
#include <string>
#include <vector>

#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::probes {

struct mma_promotion_options {
  std::vector<std::int64_t> lengths = {4096, 8192, 16384, 32768, 65536, 131072};
  std::vector<std::int64_t> promote_every = {1, 4, 16, 64, 0};  // instructions; 0: never
  std::vector<std::string> distributions = {"positive", "normal"};
  int samples = 16;       // dot products per (length, interval, distribution)
  std::uint64_t seed = 1;
};

struct mma_promotion_point {
  std::string distribution;
  std::int64_t length = 0;
  std::int64_t promote_every = 0;  // 0: never
  int samples = 0;
  double max_rel = 0.0;     // max over samples of |computed - exact| / |exact|
  double median_rel = 0.0;
  double mean_signed_rel = 0.0;  // mean of (computed - exact) / |exact|: truncation biases it
};

struct mma_promotion_result {
  std::string model;
  std::vector<mma_promotion_point> points;
};

// Throws an input error when a length is not a multiple of the model's k, or an interval is
// negative.
[[nodiscard]] mma_promotion_result run_mma_promotion(const emu::mma_model& model, const mma_promotion_options& o);

// One dot product under the model with promotion every `promote_every` instructions (0: never).
[[nodiscard]] double mma_chained_dot(const emu::mma_model& model, const std::vector<double>& a,
                                     const std::vector<double>& b, std::int64_t promote_every);

}  // namespace numprobe::probes
