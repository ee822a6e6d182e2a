#pragma once
// The precision floor that 16-bit base logits impose on the kl probe.
//
// A base stored in bf16 or f16 is the true (f32) logits rounded once, so even a perfect
// candidate measures KL(base || cand) > 0. The floor is the expected value of that KL:
// measured from the data, it is the mean over rows of KL(round_F(c) || c), with c the
// candidate's own logits (f32 or f64, so wider than F) and round_F round-to-nearest-even to the
// base's format F (formats::round_float_to / round_to, exact). That is the KL a candidate equal
// to the f32 truth would show against its own 16-bit rounding. A second-order expansion gives
// the same quantity analytically: rounding adds e_i, roughly uniform in half an ulp, so
// E[KL] ~= 1/2 sum_i p_i (1 - p_i) ulp_F(x_i)^2 / 12 (the softmax Fisher information
// diag(p) - p p^T against independent errors of variance ulp^2 / 12); it grows with the
// logits' magnitude: with the probability mass on bf16 logits in [16, 32) (ulp 2^-3) it is up
// to 1/2 * 2^-6 / 12 ~= 6.5e-4 nats, the order of the 5e-4 that llama.cpp users quote. tests/probes/test_kl_probe.cpp checks the measured floor
// against an independent rounding loop and this estimate.
//
// Cost: rows are sampled at a fixed stride so that at most k_floor_elements candidate values
// are rounded (all rows for inputs up to that size); the stride depends only on the shape, so
// the floor is the same for any thread count.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "numprobe/io/tensor_view.hpp"
#include "numprobe/metrics/kl.hpp"

namespace numprobe::probes {

inline constexpr std::int64_t k_floor_elements = std::int64_t{1} << 24;

struct kl_base_precision {
  std::string format;        // "bf16" or "f16"; empty: the base is f32 or f64, no floor
  bool measured = false;     // false when the candidate is no wider than the base's format
  double floor_kld_mean = 0.0, floor_kld_stderr = 0.0;
  std::int64_t rows_sampled = 0, row_stride = 1;
  std::string basis;         // one line: how the floor was obtained, or why it was not
  bool at_floor = false;     // kld.mean < 2 * floor_kld_mean
};

// The base's 16-bit format (bf16 or f16), if it has one.
[[nodiscard]] std::optional<formats::format_id> sixteen_bit_format(io::dtype base);

// Rows sampled every `row_stride_for_floor` rows (row % stride == 0).
[[nodiscard]] std::int64_t row_stride_for_floor(std::int64_t rows, std::int64_t vocab);

// Per-thread buffers for the floor.
struct floor_scratch {
  std::vector<double> x, rounded;
  metrics::kl_scratch kl;
};

// KL(round_F(c) || c) of the candidate row at element `first` of `block` (vocab values).
// NaN when the rounding overflows the format (an f16 logit beyond 65504).
[[nodiscard]] double rounding_floor_kld(const io::tensor_view& block, std::uint64_t first, std::size_t vocab,
                                        formats::format_id f, floor_scratch& s);

// The report entry: mean and standard error of the sampled rows' floors, the basis line, and
// whether the measured KL mean sits at the floor.
[[nodiscard]] kl_base_precision summarize_floor(io::dtype base, io::dtype cand, std::int64_t stride,
                                                const std::vector<double>& floors, double kld_mean);

// base_precision.floor_kld_mean, base_precision.mean_over_floor (kld_mean / floor); nullopt
// for a name outside "base_precision.". Throws an input error naming --bound on an unknown
// name, or when no floor was measured (the base is f32/f64, or the candidate is 16-bit).
[[nodiscard]] std::optional<double> precision_metric(const kl_base_precision& p, double kld_mean,
                                                     const std::string& name);

// {format, measured, floor_kld_mean, floor_kld_stderr, rows_sampled, row_stride, basis,
//  at_floor}; null when the base is f32 or f64.
[[nodiscard]] nlohmann::json to_json(const kl_base_precision& p);

}  // namespace numprobe::probes
