// The MMA models (issue 31; src/kernels/emu/mma_model.hpp). Every expected value is derived by
// hand from the model's definition in the comment beside it (exact dyadic values: the test
// compares with ==, the basis being that every step is exact or a stated rounding), never
// computed by the code under test.
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <vector>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::emu {
namespace {

using formats::format_id;

double p2(int e) { return std::ldexp(1.0, e); }

// A dot product of the model's K with the given (index, a, b) entries; the rest zero.
struct dot {
  std::vector<double> a, b;
  explicit dot(int k) : a(k, 0.0), b(k, 0.0) {}
  dot& set(int i, double x, double y) {
    a[i] = x;
    b[i] = y;
    return *this;
  }
  dot& fill(int from, int to, double x, double y) {
    for (int i = from; i < to; ++i) set(i, x, y);
    return *this;
  }
};

double run(const mma_model& m, const dot& d, double c = 0.0) { return mma_dot(m, d.a, d.b, c); }

const mma_model& model(const char* name) { return find_mma_model(name); }

TEST(mma_model, registry_holds_the_contract_names) {
  for (const char* name : {"h200-wgmma-e4m3", "h200-wgmma-bf16", "h200-mma-bf16"})
    EXPECT_EQ(model(name).name, name);
  const auto& e4m3 = model("h200-wgmma-e4m3");
  EXPECT_EQ(e4m3.internal_fraction_bits, 13);  // MMA-Sim: Hopper wgmma fp8 keeps 13 bits
  EXPECT_EQ(e4m3.output_fraction_bits, 13);    // and writes e8m13
  EXPECT_EQ(e4m3.k_group, 32);
  EXPECT_EQ(model("h200-wgmma-bf16").internal_fraction_bits, 25);
  try {
    (void)find_mma_model("h300-nothing");
    FAIL() << "unknown name accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("h200-wgmma-e4m3"), std::string::npos) << e.what();
  }
}

TEST(mma_model, exact_small_sum) {
  // 1*1 + 2*0.5 + c 0.25: every value a power of two, all within the kept bits: 2.25.
  EXPECT_EQ(run(model("h200-mma-bf16"), dot(16).set(0, 1, 1).set(1, 2, 0.5), 0.25), 2.25);
}

TEST(mma_model, bits_kept_by_the_fused_sum_bf16) {
  const auto& m = model("h200-mma-bf16");  // F = 25, truncation, output fp32 truncated
  // 1 + 15 * 2^-24: each 2^-24 is 2 units of 2^-25, kept; exact sum 1 + 7.5 * 2^-23,
  // truncated to 23 bits: 1 + 7 * 2^-23.
  EXPECT_EQ(run(m, dot(16).set(0, 1, 1).fill(1, 16, p2(-12), p2(-12))), 1 + 7 * p2(-23));
  // 1 + 15 * 2^-25: one unit each, kept: 1 + 3.75 * 2^-23 -> 1 + 3 * 2^-23.
  EXPECT_EQ(run(m, dot(16).set(0, 1, 1).fill(1, 16, p2(-13), p2(-12))), 1 + 3 * p2(-23));
  // 1 + 15 * 2^-26: half a unit each, truncated to 0: exactly 1 (an exact fp32 sum would
  // give 1 + 2^-23).
  EXPECT_EQ(run(m, dot(16).set(0, 1, 1).fill(1, 16, p2(-13), p2(-13))), 1.0);
}

TEST(mma_model, bits_kept_24_vs_25) {
  // Seven terms of 2^-25 in the first group with 1: F = 25 keeps them (1 + 7 * 2^-25 =
  // 1 + 1.75 * 2^-23 -> 1 + 2^-23), F = 24 (Ampere) truncates each to 0: 1.
  const dot d = dot(16).set(0, 1, 1).fill(1, 8, p2(-13), p2(-12));
  EXPECT_EQ(run(model("h200-mma-bf16"), d), 1 + p2(-23));
  EXPECT_EQ(run(model("a100-mma-bf16"), d), 1.0);
}

TEST(mma_model, internal_rounding_of_negative_terms) {
  mma_model m = model("h200-mma-bf16");
  // 1 + 15 * (-0.75 unit), unit 2^-25: -1.5 * 2^-26 = -(1.5*2^-13)(2^-13).
  const dot d = dot(16).set(0, 1, 1).fill(1, 16, -1.5 * p2(-13), p2(-13));
  // toward zero: each term's magnitude truncated to 0: 1.
  EXPECT_EQ(run(m, d), 1.0);
  // nearest even and down: each -1 unit: 1 - 15 * 2^-25 = 1 - 7.5 * 2^-24, in [0.5, 1) the
  // fp32 lsb is 2^-24: toward zero -> 1 - 8 * 2^-24 = 1 - 2^-21.
  m.internal_rounding = mma_rounding::m_nearest_even;
  EXPECT_EQ(run(m, d), 1 - p2(-21));
  m.internal_rounding = mma_rounding::m_down;
  EXPECT_EQ(run(m, d), 1 - p2(-21));
  // Positive 0.75 units: toward zero 0, down 0, nearest 1 unit each: 1 + 15 * 2^-25 =
  // 1 + 3.75 * 2^-23 -> 1 + 3 * 2^-23.
  const dot up = dot(16).set(0, 1, 1).fill(1, 16, 1.5 * p2(-13), p2(-13));
  EXPECT_EQ(run(m, up), 1.0);
  m.internal_rounding = mma_rounding::m_nearest_even;
  EXPECT_EQ(run(m, up), 1 + 3 * p2(-23));
}

TEST(mma_model, ties_at_half_a_unit) {
  mma_model m = model("h200-mma-bf16");
  m.internal_rounding = mma_rounding::m_nearest_even;
  // 1 + 15 * 2^-26: half a unit each, a tie, to even (0): 1.
  EXPECT_EQ(run(m, dot(16).set(0, 1, 1).fill(1, 16, p2(-13), p2(-13))), 1.0);
  // 1 + 15 * 1.5 units (3 * 2^-26): a tie between 1 and 2 units, to even: 2 units each:
  // 1 + 30 * 2^-25 = 1 + 7.5 * 2^-23 -> toward zero 1 + 7 * 2^-23.
  EXPECT_EQ(run(m, dot(16).set(0, 1, 1).fill(1, 16, 1.5 * p2(-12), p2(-13))), 1 + 7 * p2(-23));
}

TEST(mma_model, output_rounding) {
  mma_model m = model("h200-mma-bf16");
  // 1 + 2^-24 + 2^-25 (3 units): kept, output lsb 2^-23: 0.75 lsb. Toward zero: 1; nearest: 1 + 2^-23.
  const dot d = dot(16).set(0, 1, 1).set(1, p2(-12), p2(-12)).set(2, p2(-13), p2(-12));
  EXPECT_EQ(run(m, d), 1.0);
  m.output_rounding = mma_rounding::m_nearest_even;
  EXPECT_EQ(run(m, d), 1 + p2(-23));
}

TEST(mma_model, c_joins_the_group) {
  mma_model m = model("h200-mma-bf16");
  // c = 1 and 15 * 2^-26: in the group, each half a unit, truncated: 1.
  const dot d = dot(16).fill(0, 15, p2(-13), p2(-13));
  EXPECT_EQ(run(m, d, 1.0), 1.0);
  // C added after: the products' sum 15 * 2^-26 is exact, then 1 + 15 * 2^-26 = 1 + 1.875 * 2^-23,
  // truncated: 1 + 2^-23.
  m.c_in_group = false;
  EXPECT_EQ(run(m, d, 1.0), 1 + p2(-23));
  // Cancellation with C: c = 1, a0*b0 = -1, 2^-30 in the group: e_max 0, 2^-30 truncated: 0.
  EXPECT_EQ(run(model("h200-mma-bf16"), dot(16).set(0, -1, 1).set(1, p2(-15), p2(-15)), 1.0), 0.0);
}

TEST(mma_model, split_k_groups) {
  // 1 - 1 in the first half, 2^-30 at index 8: one group of 16 aligns 2^-30 to e_max 0 and
  // truncates it: 0. Two groups of 8 (Ampere): the first gives 0, the second sees 2^-30 alone: 2^-30.
  const dot d = dot(16).set(0, 1, 1).set(1, -1, 1).set(8, p2(-15), p2(-15));
  EXPECT_EQ(run(model("h200-mma-bf16"), d), 0.0);
  EXPECT_EQ(run(model("a100-mma-bf16"), d), p2(-30));
}

TEST(mma_model, fp8_wgmma_13_bits_and_e8m13_output) {
  const auto& m = model("h200-wgmma-e4m3");
  // 16*16 = 2^8 and 31 * 2^-6: unit 2^(8-13) = 2^-5, 2^-6 is half a unit, truncated: 256.
  EXPECT_EQ(run(m, dot(32).set(0, 16, 16).fill(1, 32, 0.125, 0.125)), 256.0);
  // 31 * 2^-5 (0.25 * 0.125): one unit each, kept: 256 + 31/32, 13 bits below 2^8: exact.
  EXPECT_EQ(run(m, dot(32).set(0, 16, 16).fill(1, 32, 0.25, 0.125)), 256.0 + 31.0 / 32);
  // Carry: 256 + 256 + 3 * 2^-5 = 512 + 1.5 * 2^-4; the e8m13 output's lsb at 2^9 is 2^-4,
  // truncated: 512 + 2^-4.
  EXPECT_EQ(run(m, dot(32).set(0, 16, 16).set(1, 16, 16).fill(2, 5, 0.25, 0.125)), 512.0 + 0.0625);
}

TEST(mma_model, products_exact_or_rounded) {
  mma_model m = model("h200-mma-f16");
  const double x = 1 + p2(-10);  // fp16 1 + ulp
  // Exact: (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20 (20 bits, kept by F = 25 and by fp32).
  EXPECT_EQ(run(m, dot(16).set(0, x, x)), 1 + p2(-9) + p2(-20));
  // Rounded to fp16's 10 bits (RNE): 2^-20 is below half an ulp (2^-11): 1 + 2^-9.
  m.products_exact = false;
  EXPECT_EQ(run(m, dot(16).set(0, x, x)), 1 + p2(-9));
}

TEST(mma_model, subnormals) {
  mma_model m = model("h200-mma-bf16");
  // bf16 subnormal 2^-130 times 2^10: 2^-120, a normal fp32 output.
  EXPECT_EQ(run(m, dot(16).set(0, p2(-130), p2(10))), p2(-120));
  // 2^-70 * 2^-70 = 2^-140, an fp32 subnormal, kept.
  EXPECT_EQ(run(m, dot(16).set(0, p2(-70), p2(-70))), p2(-140));
  // 2^-140 + 1.5 * 2^-150 (0.75 lsb of the subnormal grid 2^-149), kept internally (unit
  // 2^-165), truncated at the output: 2^-140; nearest: 2^-140 + 2^-149.
  const dot d = dot(16).set(0, p2(-70), p2(-70)).set(1, 1.5 * p2(-75), p2(-75));
  EXPECT_EQ(run(m, d), p2(-140));
  m.output_rounding = mma_rounding::m_nearest_even;
  EXPECT_EQ(run(m, d), p2(-140) + p2(-149));
  m.flush_subnormal_inputs = true;
  EXPECT_EQ(run(m, dot(16).set(0, p2(-130), p2(10))), 0.0);
  m.flush_subnormal_output = true;
  EXPECT_EQ(run(m, dot(16).set(0, p2(-70), p2(-70))), 0.0);
  // fp8: the e4m3 subnormal 2^-9 times 1: 2^-9.
  EXPECT_EQ(run(model("h200-wgmma-e4m3"), dot(32).set(0, p2(-9), 1)), p2(-9));
}

// Hopper's fp8 mma.sync as measured on an H200 (docs/hardware.md): two groups of 16 with 25 bits,
// k mod 4 < 2 first, the first group's fp32 result (truncated) entering the second as C, and the
// instruction's C added last by an fp32 addition rounded to nearest. With
// +2^16 at k = i, -2^16 at k = j and 2^-8 (24 bits below) at k = 5, hand-derived:
//   i, j both in the first group (0,1), (0,4), or both in the second (2,3): the pair cancels
//     inside its group and 2^-8 survives;
//   +2^16 with 2^-8 in the first group, -2^16 in the second (0,2), (1,2), (0,31): the first group
//     gives 2^16 + 2^-8, which needs 25 bits, truncated in fp32 to 2^16: the second gives 0;
//   -2^16 with 2^-8 first, +2^16 second (3,4): -(2^16 - 2^-8) is an fp32 value (24 bits), and the
//     second group gives exactly 2^-8.
// Groups in k order would keep 2^-8 in every case but the split ones across k = 16.
TEST(mma_model, hopper_fp8_mma_sync_takes_pairs_of_k_first) {
  const mma_model& m = model("h200-mma-e4m3");
  const std::vector<int> order = mma_pairs_interleaved_order(32);
  ASSERT_EQ(order.size(), 32u);
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[2], 4);
  EXPECT_EQ(order[16], 2);
  EXPECT_EQ(order[31], 31);
  auto probe = [&](int i, int j) {
    return run(m, dot(32).set(i, p2(8), p2(8)).set(j, -p2(8), p2(8)).set(5, p2(-4), p2(-4)));
  };
  EXPECT_EQ(probe(0, 1), p2(-8));
  EXPECT_EQ(probe(0, 4), p2(-8));
  EXPECT_EQ(probe(2, 3), p2(-8));
  EXPECT_EQ(probe(0, 2), 0.0);
  EXPECT_EQ(probe(1, 2), 0.0);
  EXPECT_EQ(probe(0, 31), 0.0);
  EXPECT_EQ(probe(3, 4), p2(-8));
  // 2^-10 (26 bits below 2^16) is dropped even with the pair in one group: 25 bits kept.
  EXPECT_EQ(run(m, dot(32).set(0, p2(8), p2(8)).set(1, -p2(8), p2(8)).set(4, p2(-5), p2(-5))), 0.0);
  // C last, rounded to nearest: products 1 (k = 0) and C = 1.5 * 2^-24. The groups give 1; then
  // 1 + 0.75 ulp rounds to nearest, 1 + 2^-23. With C as a term of the first group (F = 25, grid
  // 2^-25: C kept exactly) the sum 1 + 3 * 2^-25 would be truncated to 1.
  EXPECT_EQ(run(m, dot(32).set(0, 1, 1), 1.5 * p2(-24)), 1 + p2(-23));
  mma_model c_in_group = m;
  c_in_group.c_added_last = false;
  EXPECT_EQ(run(c_in_group, dot(32).set(0, 1, 1), 1.5 * p2(-24)), 1.0);
  mma_model bad = m;
  bad.k_order[1] = 0;  // not a permutation
  EXPECT_THROW((void)run(bad, dot(32)), error);
}

TEST(mma_model, nan_and_inf) {
  const auto& m = model("h200-mma-bf16");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(run(m, dot(16).set(0, inf, 1)), inf);
  EXPECT_EQ(run(m, dot(16).set(0, -inf, 1), 5.0), -inf);
  EXPECT_TRUE(std::isnan(run(m, dot(16).set(0, inf, 0))));
  EXPECT_TRUE(std::isnan(run(m, dot(16).set(0, inf, 1).set(1, -inf, 1))));
  EXPECT_TRUE(std::isnan(run(m, dot(16).set(0, 1, 1), std::numeric_limits<double>::quiet_NaN())));
}

TEST(mma_model, refuses_values_outside_the_format) {
  const auto& m = model("h200-wgmma-e4m3");
  // 1.0625 needs 4 fraction bits; e4m3 has 3. e4m3fn has no infinity.
  for (double bad : {1.0625, 512.0, std::numeric_limits<double>::infinity()}) {
    try {
      (void)run(m, dot(32).set(0, bad, 1));
      FAIL() << bad << " accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), exit_code::m_input);
    }
  }
  EXPECT_THROW((void)mma_dot(m, std::vector<double>(16, 0.0), std::vector<double>(16, 0.0), 0.0), error);
}

// Integer models (PTX .s32.s8.s8): exact products and sums; the s32 wraps modulo 2^32, or with
// .satfinite is clamped once. Values by hand: 127 * 127 = 16129, M = 2^31 - 1 = 2147483647.
TEST(mma_model, integer_sums_are_exact) {
  for (const char* name : {"h200-mma-s8", "h200-mma-s8-satfinite", "h200-wgmma-s8", "h200-wgmma-s8-satfinite"}) {
    const auto& m = model(name);
    EXPECT_TRUE(m.integer()) << name;
    // 32 * 16129 + 5 = 516133; 32 * (-128 * 127) - 7 = -520199.
    EXPECT_EQ(run(m, dot(32).fill(0, 32, 127, 127), 5.0), 516133.0) << name;
    EXPECT_EQ(run(m, dot(32).fill(0, 32, -128, 127), -7.0), -520199.0) << name;
  }
}

TEST(mma_model, integer_overflow_wraps_or_clamps_once) {
  const auto& wrap = model("h200-mma-s8");
  const auto& sat = model("h200-mma-s8-satfinite");
  const double top = 2147483647.0, bottom = -2147483648.0;
  EXPECT_EQ(run(wrap, dot(32).set(0, 1, 1), top), bottom);  // M + 1 wraps to -2^31
  EXPECT_EQ(run(sat, dot(32).set(0, 1, 1), top), top);
  EXPECT_EQ(run(wrap, dot(32).set(0, -1, 1), bottom), top);  // -2^31 - 1 wraps to M
  EXPECT_EQ(run(sat, dot(32).set(0, -1, 1), bottom), bottom);
  // M - 100 + 16129 - 16129: clamped once at the end gives M - 100 (not M - 16129); wrapped too.
  EXPECT_EQ(run(sat, dot(32).set(0, 127, 127).set(16, -127, 127), top - 100), top - 100);
  EXPECT_EQ(run(wrap, dot(32).set(0, 127, 127).set(16, -127, 127), top - 100), top - 100);
  // 32 * 16384 + (M - 100) = M + 524188: wraps to -2^31 + 524187; clamps to M.
  EXPECT_EQ(run(wrap, dot(32).fill(0, 32, -128, -128), top - 100), bottom + 524187.0);
  EXPECT_EQ(run(sat, dot(32).fill(0, 32, -128, -128), top - 100), top);
}

TEST(mma_model, integer_inputs_outside_s8_and_s32_are_refused) {
  const auto& m = model("h200-mma-s8");
  for (double bad : {128.0, -129.0, 0.5, std::numeric_limits<double>::quiet_NaN()})
    EXPECT_THROW((void)run(m, dot(32).set(0, bad, 1)), error) << bad;
  EXPECT_THROW((void)run(m, dot(32).set(0, 1, 1), 2147483648.0), error);
  EXPECT_THROW((void)run(m, dot(32).set(0, 1, 1), 0.25), error);
}

// An fp16 accumulator: the fused sum (F = 25, truncated) rounded to fp16 to nearest even.
// 1 + 2^-11 + 2^-12 (three exact products, kept by 25 bits) is 0.75 of fp16's unit 2^-10
// above 1: nearest gives 1 + 2^-10 (fp32's P=23 would keep it exactly).
TEST(mma_model, fp16_accumulator_rounds_to_nearest_even) {
  const auto& m = model("h200-mma-f16-f16acc");
  EXPECT_EQ(m.output, format_id::m_f16);
  EXPECT_EQ(run(m, dot(16).set(0, 1, 1).set(1, p2(-11), 1).set(2, p2(-12), 1)), 1 + p2(-10));
  // Exactly half a unit: ties to even keep 1.
  EXPECT_EQ(run(m, dot(16).set(0, 1, 1).set(1, p2(-11), 1)), 1.0);
  // 65504 + 16: past fp16's max by half its unit 32 at 2^15: nearest even overflows to +Inf.
  EXPECT_EQ(run(m, dot(16).set(0, 65504, 1).set(1, 16, 1)), std::numeric_limits<double>::infinity());
  // C must be an fp16 value: 1 + 2^-12 is not.
  EXPECT_THROW((void)run(m, dot(16), 1 + p2(-12)), error);
}

// Hopper's fp8 mma.sync with an fp16 accumulator (measured, docs/hardware.md): the groups k mod 4
// in {0, 1} and {2, 3}, each rounded to fp16 to nearest, then C added in fp16 to nearest. Products
// 1 (k = 0), 2^-11 (k = 1: 2^-6 * 2^-5) and 2^-11 (k = 2): the first group's 1 + 2^-11 is a tie at
// fp16's unit 2^-10 above 1 and rounds to even, 1; the second group's 1 + 2^-11 again: 1. A chain
// in fp32 rounded once would give 1 + 2^-10. Then C = 3 * 2^-12 (0.75 of the unit) rounds up.
TEST(mma_model, hopper_fp8_mma_sync_fp16_accumulator_rounds_each_group) {
  const auto& m = model("h200-mma-e4m3-f16acc");
  const dot d = dot(32).set(0, 1, 1).set(1, p2(-6), p2(-5)).set(2, p2(-6), p2(-5));
  EXPECT_EQ(run(m, d), 1.0);
  EXPECT_EQ(run(m, d, 3 * p2(-12)), 1 + p2(-10));
  // The same products through the fp32 form (h200-mma-e4m3) keep 1 + 2^-10 exactly.
  EXPECT_EQ(run(model("h200-mma-e4m3"), d), 1 + p2(-10));
}

// Every numprobe target compiles with -ffp-contract=off (cmake/numprobe_options.cmake, shared by
// the libraries and this test): an emulated kernel's "p = a * b; q = p + c" is two roundings, as
// the code says. With a = b = 1 + 2^-12 and c = -(1 + 2^-11): a * b = 1 + 2^-11 + 2^-24 rounds
// (a tie, to even) to 1 + 2^-11 and the sum is 0; contracted into an fma it would be 2^-24. g++
// contracts across statements by default once FMA is in the target (x86-64-v3); without the flag
// this test fails there (the dequant GEMM's promotion was fused that way before the flag).
[[gnu::noinline]] float mul_then_add(float a, float b, float c) {
  const float p = a * b;
  return p + c;
}

TEST(build_flags, separate_statements_round_separately) {
  volatile float a = 1.0f + 0x1p-12f, b = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
  EXPECT_EQ(mul_then_add(a, b, c), 0.0f);
}

}  // namespace
}  // namespace numprobe::emu
