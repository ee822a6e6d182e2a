#pragma once
// Error metrics of a candidate attention output against a reference output on the same rows.
// NaN and Inf in the candidate are counted before any error metric is formed: a non-finite
// candidate element makes every error metric +inf, so it can never pass a bound.
// The LSE is counted too. A fully masked row is defined as O = 0, LSE = -inf (NUMERICS.md), so
// -inf is a finding only where the reference row sees a key; NaN and +inf always are.
#include <cstdint>
#include <vector>

#include "numprobe/core/attention_output.hpp"
#include "numprobe/formats/format.hpp"

namespace numprobe::metrics {

struct row_head_error {
  std::size_t index = 0;     // position in attention_output::rows
  std::int64_t row = 0;      // flat row b*T + t
  std::int64_t head = 0;
  double rel_rms = 0.0;      // ||o - r|| / ||r|| over D (absolute when ||r|| == 0)
  double max_abs = 0.0;
  double lse_abs = 0.0;      // |lse - lse_ref| in nats (0 when both are -inf)
  double lse = 0.0;          // the candidate's LSE itself (for reports of non-finite rows)
  std::int64_t o_nan = 0;    // NaN elements of O in this (row, head)
  std::int64_t o_inf = 0;
  bool lse_nan = false;      // the candidate's LSE is NaN (only when the LSE is known)
  bool lse_inf = false;      // +inf, or -inf on a row whose reference sees a key
  [[nodiscard]] bool nonfinite() const { return o_nan || o_inf || lse_nan || lse_inf; }
};

struct attention_errors {
  std::int64_t elements = 0;
  std::int64_t nan_count = 0;     // candidate NaN where the reference is a number
  std::int64_t inf_count = 0;
  double max_abs = 0.0;
  double max_rel = 0.0;           // |o - r| / max(|r|, rel_floor)
  double rel_floor = 0.0;         // 1e-3 x RMS(reference): keeps near-zero elements from
                                  // turning rounding noise into huge relative errors
  double rel_rms = 0.0;           // sqrt(sum |o - r|^2 / sum |r|^2) over all elements
  double max_ulp = 0.0;           // max |o - r| in units of the output dtype's ulp at
                                  // max(|r|, rel_floor)
  double lse_max_abs = 0.0;       // max |lse - lse_ref|
  // <o - r, r> / <r, r> over the finite elements: the error's component along the reference.
  // Negative when mass is lost from the numerator only (O shrinks, l does not), positive when l
  // falls short; rounding error is unbiased and leaves it near 0.
  double bias = 0.0;
  std::int64_t lse_mismatch_inf = 0;  // one side -inf and the other not
  std::int64_t lse_nan_count = 0;     // (row, head) pairs whose candidate LSE is NaN
  std::int64_t lse_inf_count = 0;     // ... is +inf, or -inf where the reference is finite
  bool lse_known = true;              // false: the candidate gave no LSE (not judged)
  std::vector<row_head_error> per_row;  // one per (row, head), in output order

  // Every non-finite finding, O and LSE: the quantity the `nonfinite` gates hold at 0.
  [[nodiscard]] std::int64_t nonfinite_total() const {
    return nan_count + inf_count + lse_nan_count + lse_inf_count;
  }
};

// ulp of `fmt` at magnitude |x| (the spacing of the format's grid there).
[[nodiscard]] double ulp_at(formats::format_id fmt, double x);

[[nodiscard]] attention_errors compare_attention(const attention_output& candidate,
                                                 const attention_output& reference,
                                                 formats::format_id out_dtype);

// Indices into errors.per_row of the n worst (row, head) pairs by rel_rms, worst first.
[[nodiscard]] std::vector<std::size_t> worst_rows(const attention_errors& e, std::size_t n);

}  // namespace numprobe::metrics
