#pragma once
// `numprobe quant --gemm TOKENS --acc-model NAME [--acc-promote N]` (issue 31 item 3): the
// quantized tensor as the weight W [n, K] of a dequant GEMM Y = X W^T, with X [TOKENS, K]
// synthetic activations (quant_dist llm, seed + 1) quantized with W's scheme (its blocks one row
// high: block2d 128x128 weights meet 1x128 activation tiles, as DeepSeek-V3 does). The product
// runs the way a Hopper kernel runs it: per output, the codes of each scale block along K go
// through the named MMA model instruction by instruction (K of the model per instruction, the
// last one padded with zero products, each taking the running value as C), and the partial sum
// is promoted into an fp32 accumulator, outer = outer + s * inner with s = s_x * s_w (three fp32
// roundings; with --acc-fma one fused rounding), at the end of every scale block and, with N > 0, after every N instructions
// (DeepSeek-V3's promotion every 128 elements is N = 4 with the k32 fp8 model). One scale block
// over the whole K (tensor, channel, token schemes) and no N: the MMA accumulates all of K, then
// one scaling.
//
// Measured against Y_q, the fp64 product of the same dequantized operands (the accumulation
// error alone), and Y, the fp64 product of the unquantized ones (quantization plus accumulation);
// the baseline is the same chain with an fp32 accumulator in place of the model (fp32 adds in k
// order), so acc / fp32 says what the tensor core's accumulator costs over fp32.
#include <cstdint>
#include <string>
#include <vector>

#include "numprobe/formats/scheme.hpp"

namespace numprobe::probes {

struct quant_gemm_options {
  std::int64_t tokens = 0;   // rows of X; 0: no GEMM
  std::string acc_model;     // a name of numprobe mma --list-models
  std::int64_t promote = 0;  // instructions per promotion inside a scale block (0: block ends only)
  // --acc-fma: the promotion as one fused multiply-add, outer = fma(inner, s, outer) (s = s_x * s_w
  // still its own fp32 product): what a compiler that contracts `outer + inner * s` emits, as
  // Triton does by default (enable_fp_fusion). Both chains, the model's and the fp32 baseline's.
  bool acc_fma = false;
};

struct quant_gemm_report {
  bool on = false;
  std::string model;            // the model's name
  std::string instruction;      // what it models
  std::int64_t tokens = 0, n = 0, k = 0;
  std::int64_t k_block = 0;     // elements per scale block along K (K: one block)
  std::int64_t instructions_per_block = 0;
  std::int64_t promote = 0;
  bool acc_fma = false;           // the promotion fused (quant_gemm_options::acc_fma)
  double acc_rel_rms = 0.0;       // ||Y_model - Y_q|| / ||Y_q||
  double fp32_acc_rel_rms = 0.0;  // ||Y_fp32 - Y_q|| / ||Y_q||: the fp32-accumulator baseline
  double rel_rms = 0.0;           // ||Y_model - Y|| / ||Y||: quantization and accumulation
  double fp32_rel_rms = 0.0;      // ||Y_fp32 - Y|| / ||Y||
  double acc_max_abs = 0.0;       // max |Y_model - Y_q|
  std::int64_t nonfinite = 0;     // NaN or Inf outputs of the model chain
  std::vector<double> outputs;    // Y_model, [tokens, n] row-major (not in the JSON)
  std::vector<double> fp32_outputs;  // the fp32-accumulator chain's Y, [tokens, n]
  formats::quant_result x;        // X quantized (its codes and scales: --dump writes them)
  // acc_rel_rms / fp32_acc_rel_rms: 1 when both are 0, infinite when only the baseline is 0.
  [[nodiscard]] double acc_ratio() const;
};

// Throws an input error naming --acc-model when W's element format is not the model's input or
// W's scale blocks along K are not whole instructions, naming --gemm for a scheme with zero
// points or blocks not along K (axis 0).
[[nodiscard]] quant_gemm_report run_quant_gemm(const quant_gemm_options& g, const formats::scheme_config& config,
                                               const formats::quant_result& w, const std::vector<double>& w_input,
                                               std::int64_t n, std::int64_t k, std::uint64_t seed);
// The same with a given X [g.tokens, k] (row-major) instead of the synthetic one.
[[nodiscard]] quant_gemm_report run_quant_gemm_with(const quant_gemm_options& g, const formats::scheme_config& config,
                                                    const formats::quant_result& w, const std::vector<double>& w_input,
                                                    std::int64_t n, std::int64_t k, const std::vector<double>& x,
                                                    std::uint64_t seed);

}  // namespace numprobe::probes
