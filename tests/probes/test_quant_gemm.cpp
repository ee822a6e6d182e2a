// `quant --gemm` (issue 31 item 3; probes/quant/quant_gemm.hpp): the dequant GEMM through an
// MMA model, on operands whose every output is derived by hand. fp8-tensor with both amaxes at
// 448 (both scales exactly 1, codes = values). K = 256 (8 k32 instructions). W's row: 448 at
// k = 0, 2^-6 at k = 1..254, 0 at k = 255; X's row: 1 everywhere except 448 at k = 255 (its amax,
// multiplied by W's 0). The exact product is 448 + 254 * 2^-6 = 451.96875 (exact in fp32, so the
// fp32-accumulator baseline is exact too). h200-wgmma-e4m3 keeps 13 fraction bits below the
// group's largest exponent, truncated: next to 448 = 1.75 * 2^8 the unit is 2^-5, and 2^-6
// products vanish; from zero, 32 of them sum exactly to 0.5 (31 in the last instruction: 0.484375).
#include <gtest/gtest.h>

#include <cmath>

#include "numprobe/base/error.hpp"
#include "probes/quant/quant_gemm.hpp"

namespace numprobe::probes {
namespace {

constexpr std::int64_t k_k = 256;

struct operands {
  formats::scheme_config config = formats::find_scheme("fp8-tensor").defaults;
  std::vector<double> w, x;
  formats::quant_result wq;
  operands() : w(k_k, std::ldexp(1.0, -6)), x(k_k, 1.0) {
    w[0] = 448.0;
    w[k_k - 1] = 0.0;
    x[k_k - 1] = 448.0;
    wq = formats::quantize(config, w, 1, k_k);
  }
  quant_gemm_report run(std::int64_t promote, const std::string& model = "h200-wgmma-e4m3") const {
    quant_gemm_options g;
    g.tokens = 1;
    g.acc_model = model;
    g.promote = promote;
    return run_quant_gemm_with(g, config, wq, w, 1, k_k, x, 7);
  }
};

TEST(quant_gemm, wgmma_e4m3_promotion_is_exact_by_hand) {
  const operands op;
  ASSERT_EQ(op.wq.blocks.at(0).scale, 1.0);
  const double exact = 448.0 + 254.0 / 64.0;
  // One accumulator over K: every small product is lost.
  const auto none = op.run(0);
  ASSERT_EQ(none.outputs.size(), 1u);
  EXPECT_EQ(none.outputs[0], 448.0);
  // sqrt(d^2 / q^2) in double: four roundings, so within 4 ulps of |d| / |q|.
  const double want = (exact - 448.0) / exact;
  EXPECT_NEAR(none.acc_rel_rms, want, 4 * std::ldexp(want, -52));
  EXPECT_EQ(none.fp32_acc_rel_rms, 0.0);  // fp32 adds of 2^-6 next to 448 are exact
  // Every instruction promoted: the first keeps 448, six add 0.5, the last 0.484375.
  EXPECT_EQ(op.run(1).outputs[0], 448.0 + 6 * 0.5 + 0.484375);
  // Every 4 instructions: the first four give 448, the next four 0.5 + 0.5 + 0.5 + 0.484375.
  EXPECT_EQ(op.run(4).outputs[0], 448.0 + 1.984375);
  // Every 3: {448}, {0.5 x 3}, {0.5, 0.484375} at the block end.
  EXPECT_EQ(op.run(3).outputs[0], 448.0 + 1.5 + 0.984375);
}

// Scale blocks along K: fp8-block128 (W's 128x128 blocks, X's 1x128 tiles), K = 256, two
// blocks. Block 0 as above (448 at k = 0, 2^-6 at k = 1..126, 0 at k = 127, where X holds its
// amax 448). Block 1: W = 224 at k = 128 (X = 0 there), 2^-6 at k = 129..254, 0 at 255 (X = 448):
// its scale is 224 / 448 = 0.5, so its codes are 448 and 2^-5. X's scales are 1. Block 0's
// inner sum is 448 (its small products truncated away); block 1's is 126 * 2^-5 = 3.9375, exact
// (a 2^-5 product beside partial sums below 4 keeps 13 bits), promoted as 0.5 * 3.9375. So Y =
// 448 + 1.96875 = 449.96875, where one accumulator over K would give 448 (the tensor case
// above): the block end promotes, and the block's own scale is applied.
TEST(quant_gemm, scale_blocks_promote_at_their_ends_with_their_scales) {
  const formats::scheme_config config = formats::find_scheme("fp8-block128").defaults;
  std::vector<double> w(k_k, std::ldexp(1.0, -6)), x(k_k, 1.0);
  w[0] = 448.0;
  w[127] = 0.0;
  x[127] = 448.0;
  w[128] = 224.0;
  x[128] = 0.0;
  w[255] = 0.0;
  x[255] = 448.0;
  const auto wq = formats::quantize(config, w, 1, k_k);
  ASSERT_EQ(wq.blocks.size(), 2u);
  ASSERT_EQ(wq.blocks[0].scale, 1.0);
  ASSERT_EQ(wq.blocks[1].scale, 0.5);
  quant_gemm_options g;
  g.tokens = 1;
  g.acc_model = "h200-wgmma-e4m3";
  const auto r = run_quant_gemm_with(g, config, wq, w, 1, k_k, x, 7);
  EXPECT_EQ(r.k_block, 128);
  EXPECT_EQ(r.instructions_per_block, 4);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0], 448.0 + 1.96875);
  // Promoting every 2 instructions as well: block 0's second pair starts from zero and keeps its
  // 63 small products (0.984375); block 1's sums were exact already (1.96875 in all).
  g.promote = 2;
  EXPECT_EQ(run_quant_gemm_with(g, config, wq, w, 1, k_k, x, 7).outputs[0], 448.0 + 0.984375 + 1.96875);
}

// --acc-fma: the promotion outer + inner * s as one fma (Triton's default compile), by hand.
// fp8-tensor, K = 64 (two k32 instructions), promoted after each. W's amax 448 s with s = 1 +
// 2^-20 makes W's scale s exactly (X's amax 448: scale 1), so s = s_x * s_w = 1 + 2^-20, and the
// codes are W / s. Instruction 1's one product is 1 * 1, instruction 2's is (9/16)^2 = 81/256
// (the amaxes meet zeros). Promotion 1 starts from zero, so both forms give outer = s (exact).
// Promotion 2: the exact value is 1 + 81/256 + 337 * 2^-28, in units of fp32's 2^-23 above
// 1 + 81/256: 10.53125, so the fused form rounds once to 11 units. Separately, s * 81/256 =
// 81/256 + 10.125 * 2^-25 rounds to 10 units of 2^-25 first; the add then meets 10.5 units of
// 2^-23, a tie, and goes to the even 10. The fp32 baseline chain promotes the same way.
TEST(quant_gemm, acc_fma_fuses_the_promotion_by_hand) {
  const formats::scheme_config config = formats::find_scheme("fp8-tensor").defaults;
  const double s = 1.0 + std::ldexp(1.0, -20);
  std::vector<double> w(64, 0.0), x(64, 0.0);
  w[0] = s;
  x[0] = 1.0;
  w[1] = 448.0 * s;  // W's amax, times X's 0
  w[32] = 0.5625 * s;
  x[32] = 0.5625;
  x[63] = 448.0;  // X's amax, times W's 0
  const auto wq = formats::quantize(config, w, 1, 64);
  ASSERT_EQ(wq.blocks.at(0).scale, s);
  quant_gemm_options g;
  g.tokens = 1;
  g.acc_model = "h200-wgmma-e4m3";
  g.promote = 1;
  const double base = 1.0 + 81.0 / 256.0;
  const auto separate = run_quant_gemm_with(g, config, wq, w, 1, 64, x, 7);
  EXPECT_FALSE(separate.acc_fma);
  EXPECT_EQ(separate.outputs.at(0), base + 10 * std::ldexp(1.0, -23));
  EXPECT_EQ(separate.fp32_outputs.at(0), base + 10 * std::ldexp(1.0, -23));
  g.acc_fma = true;
  const auto fused = run_quant_gemm_with(g, config, wq, w, 1, 64, x, 7);
  EXPECT_TRUE(fused.acc_fma);
  EXPECT_EQ(fused.outputs.at(0), base + 11 * std::ldexp(1.0, -23));
  EXPECT_EQ(fused.fp32_outputs.at(0), base + 11 * std::ldexp(1.0, -23));
  // One promotion from zero (no --acc-promote): fma(inner, s, 0) is the rounded product either way.
  g.promote = 0;
  const double once = run_quant_gemm_with(g, config, wq, w, 1, 64, x, 7).outputs.at(0);
  g.acc_fma = false;
  EXPECT_EQ(run_quant_gemm_with(g, config, wq, w, 1, 64, x, 7).outputs.at(0), once);
}

// The ratio to the fp32 baseline is never 0 by default: in the tensor case the fp32 chain is
// exact (error 0) while the model's is not, so the ratio is infinite, and a gate
// gemm_acc_ratio<=X cannot hold.
TEST(quant_gemm, ratio_to_an_exact_baseline_is_infinite) {
  const operands op;
  const auto r = op.run(0);
  ASSERT_EQ(r.fp32_acc_rel_rms, 0.0);
  ASSERT_GT(r.acc_rel_rms, 0.0);
  EXPECT_TRUE(std::isinf(r.acc_ratio()));
}

TEST(quant_gemm, refuses_what_it_cannot_run) {
  const operands op;
  const auto code_at = [&](const std::function<void()>& f, const std::string& place) {
    try {
      f();
    } catch (const numprobe::error& e) {
      EXPECT_EQ(e.place(), place) << e.what();
      return e.code();
    }
    return exit_code::m_ok;
  };
  // The model reads bf16, the elements are e4m3.
  EXPECT_EQ(code_at([&] { (void)op.run(0, "h200-mma-bf16"); }, "--acc-model"), exit_code::m_input);
  EXPECT_EQ(code_at([&] { (void)op.run(0, "nosuch"); }, "--acc-model"), exit_code::m_input);
  EXPECT_EQ(code_at([&] { (void)op.run(-1); }, "--acc-promote"), exit_code::m_input);
  // Scale groups of 48 along K are not whole k32 instructions.
  formats::scheme_config group = formats::find_scheme("group").defaults;
  group.element = formats::format_id::m_e4m3fn;
  group.group = 48;
  const std::vector<double> w(96, 1.0);
  const auto wq = formats::quantize(group, w, 1, 96);
  quant_gemm_options g;
  g.tokens = 1;
  g.acc_model = "h200-wgmma-e4m3";
  EXPECT_EQ(code_at([&] { (void)run_quant_gemm(g, group, wq, w, 1, 96, 1); }, "--acc-model"), exit_code::m_input);
  g.tokens = 0;
  EXPECT_EQ(code_at([&] { (void)run_quant_gemm(g, op.config, op.wq, op.w, 1, k_k, 1); }, "--gemm"),
            exit_code::m_input);
}

// An int8 GEMM through the s8 models: int8-channel with every value 127 in X and W (both scales
// 127 / 127 = 1, codes 127). K = 133152 (4161 k32 instructions) makes the exact sum 133152 *
// 16129 = 2147608608, past 2^31 - 1: the wrapping s32 holds 2147608608 - 2^32 = -2147358688,
// promoted to fp32 to nearest (a multiple of 128 there): -2147358720; .satfinite holds
// 2^31 - 1, promoted: 2^31. The accumulator must stay an integer between instructions (an fp32
// copy of it would already have lost its low bits at 2^24).
TEST(quant_gemm, int8_accumulator_wraps_or_saturates_past_s32) {
  const formats::scheme_config config = formats::find_scheme("int8-channel").defaults;
  constexpr std::int64_t k = 133152;
  const std::vector<double> w(k, 127.0), x(k, 127.0);
  const auto wq = formats::quantize(config, w, 1, k);
  ASSERT_EQ(wq.blocks.at(0).scale, 1.0);
  quant_gemm_options g;
  g.tokens = 1;
  g.acc_model = "h200-mma-s8";
  EXPECT_EQ(run_quant_gemm_with(g, config, wq, w, 1, k, x, 7).outputs.at(0), -2147358720.0);
  g.acc_model = "h200-mma-s8-satfinite";
  EXPECT_EQ(run_quant_gemm_with(g, config, wq, w, 1, k, x, 7).outputs.at(0), 2147483648.0);
  // Below the limit (K = 1024: 16516096) every model and the fp32 baseline are exact.
  const std::vector<double> w2(1024, 127.0), x2(1024, 127.0);
  const auto wq2 = formats::quantize(config, w2, 1, 1024);
  g.acc_model = "h200-mma-s8";
  const auto r = run_quant_gemm_with(g, config, wq2, w2, 1, 1024, x2, 7);
  EXPECT_EQ(r.outputs.at(0), 16516096.0);
  EXPECT_EQ(r.acc_rel_rms, 0.0);
}

}  // namespace
}  // namespace numprobe::probes
