#pragma once
// Error metrics of a candidate attention output against a reference output on the same rows.
// NaN and Inf in the candidate are counted before any error metric is formed: a non-finite
// candidate element makes every error metric +inf, so it can never pass a bound.
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
  std::int64_t lse_mismatch_inf = 0;  // one side -inf and the other not
  std::vector<row_head_error> per_row;  // one per (row, head), in output order
};

// ulp of `fmt` at magnitude |x| (the spacing of the format's grid there).
[[nodiscard]] double ulp_at(formats::format_id fmt, double x);

[[nodiscard]] attention_errors compare_attention(const attention_output& candidate,
                                                 const attention_output& reference,
                                                 formats::format_id out_dtype);

// Indices into errors.per_row of the n worst (row, head) pairs by rel_rms, worst first.
[[nodiscard]] std::vector<std::size_t> worst_rows(const attention_errors& e, std::size_t n);

}  // namespace numprobe::metrics
