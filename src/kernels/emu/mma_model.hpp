#pragma once
// A bit-accurate CPU model of one tensor-core MMA path (issue 31; docs/hardware.md): how one
// output element d = sum_k a_k * b_k + c is computed. The model is DATA, not code: the
// fraction bits the internal (fused) sum keeps, the rounding at alignment and at the output,
// the number of products fused per internal sum (k-group), whether C joins the first group,
// product exactness and subnormal flushing. Another device is one more table entry
// (mma_model_table.cpp).
//
// The algorithm (from the published description of microsoft/MMA-Sim, arXiv 2511.10909; our
// own implementation on integer significands, not a copy):
//   for each k-group (k_group consecutive products; the running value enters as C):
//     the terms are the group's products (and the running C when c_in_group);
//     e_max = the largest term exponent, where a product's exponent is e_a + e_b (each the
//       input's unbiased exponent, subnormals at the format's minimum exponent; a product's
//       significand lies in [1, 4)), and zero terms take no part;
//     every term is rounded to a multiple of 2^(e_max - internal_fraction_bits)
//       (internal_rounding: toward zero = truncation of the magnitude, down, or nearest even);
//     the rounded terms are added exactly;
//     the sum is rounded to the output format: output_fraction_bits below its own leading
//       bit (23 for fp32, 13 for the e8m13 output of fp8 wgmma, 10 for fp16) with
//       output_rounding, fp32 (or fp16) subnormals kept unless flushed.
//   NaN or Inf anywhere (inputs, or the exact sum of products) gives the IEEE result of the
//   exact sum: +-Inf, or NaN (canonical: 0x7fffffff for fp32 output).
// Integer models (input i8, an s32 accumulator: PTX's .s32.s8.s8 paths) have no rounding: the
// products and their sum with C are exact, and the s32 result wraps modulo 2^32, or with
// .satfinite is clamped once to [-2^31, 2^31 - 1] (PTX ISA, "Integer Arithmetic": mma and wgmma).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/formats/format.hpp"

namespace numprobe::emu {

enum class mma_rounding : std::uint8_t {
  m_toward_zero,   // truncate the magnitude (NVIDIA per MMA-Sim)
  m_down,          // toward -inf (floor; AMD CDNA3 per MMA-Sim)
  m_nearest_even,  // IEEE round to nearest, ties to even
};

[[nodiscard]] std::string_view mma_rounding_name(mma_rounding r);

struct mma_model {
  std::string name;                      // the contract name, e.g. h200-wgmma-e4m3
  std::string instruction;               // e.g. wgmma.m64nNk32.f32.e4m3.e4m3
  std::string source;                    // where the numbers come from (paper, measurement)
  formats::format_id input = formats::format_id::m_bf16;  // A and B element format
  int k = 16;                            // the instruction's K
  int k_group = 16;                      // products fused per internal sum (k / 2: split-k)
  int internal_fraction_bits = 25;       // bits kept below 2^e_max in the internal sum
  mma_rounding internal_rounding = mma_rounding::m_toward_zero;
  bool c_in_group = true;                // C aligned with the first group's products
  formats::format_id output = formats::format_id::m_f32;  // f32 or f16 (accumulator format)
  int output_fraction_bits = 23;         // significand bits of the rounded output (13: e8m13)
  mma_rounding output_rounding = mma_rounding::m_toward_zero;
  bool products_exact = true;            // false: each product rounded (RNE) to the input's precision
  bool flush_subnormal_inputs = false;   // subnormal A/B (and C) read as zero
  bool flush_subnormal_output = false;   // a subnormal result written as zero
  // The order in which the products enter the groups: product k_order[i] is the i-th; groups
  // are consecutive in this order. Empty: k order. Hopper's mma.sync with fp8 inputs (measured
  // on an H200, docs/hardware.md) sums k mod 4 in {0, 1} first, then k mod 4 in {2, 3}.
  std::vector<int> k_order;
  // C added after every group by one fp32 addition rounded with c_last_rounding (the groups
  // then start from zero). Hopper's fp8 mma.sync, measured on an H200: its two halves chained
  // with truncation, then C added with round to nearest (docs/hardware.md).
  bool c_added_last = false;
  mma_rounding c_last_rounding = mma_rounding::m_nearest_even;
  // Integer paths (input i8): the s32 result clamped (.satfinite) instead of wrapped.
  bool integer_saturate = false;

  [[nodiscard]] bool integer() const { return input == formats::format_id::m_i8; }
};

// The order of Hopper's fp8 mma.sync (m16n8k32): two groups of 16, the first taking the products
// with k mod 4 < 2 (0, 1, 4, 5, ...), the second the others (2, 3, 6, 7, ...).
[[nodiscard]] std::vector<int> mma_pairs_interleaved_order(int k);

// d = sum_k a[k] * b[k] + c under the model. a and b must be values of model.input (and c of
// the output format); anything else is an input error naming `place`. Lengths must equal
// model.k.
[[nodiscard]] double mma_dot(const mma_model& model, std::span<const double> a,
                             std::span<const double> b, double c,
                             const std::string& place = "mma_dot");

// True when x is a value of format f (f32, tf32, bf16, f16, e4m3fn, e5m2; NaN/Inf where the
// format has them; i8: an integer in [-128, 127]).
[[nodiscard]] bool mma_representable(formats::format_id f, double x);

// Significand bits below the leading bit, and the minimum normal exponent, of the formats
// the MMA paths read (f32, tf32, bf16, f16, e4m3fn, e5m2).
struct mma_format_bits {
  int fraction_bits;
  int min_exponent;
  int max_exponent;
  double max_finite;
  bool has_inf;
};
[[nodiscard]] mma_format_bits mma_bits(formats::format_id f);

// True when x is a value the model's accumulator holds: an fp32 or fp16 value (output), or an
// s32 integer (integer models).
[[nodiscard]] bool mma_accumulator_value(const mma_model& model, double x);

// The registry of named models (mma_model_table.cpp).
[[nodiscard]] std::span<const mma_model> mma_models();
// Throws an input error naming `place` (listing the names) when `name` is unknown.
[[nodiscard]] const mma_model& find_mma_model(std::string_view name, const std::string& place = "--model");

}  // namespace numprobe::emu
