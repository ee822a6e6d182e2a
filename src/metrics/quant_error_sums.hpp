#pragma once
// The quantization error sums of the streaming scan: sum of x^2 and of (dq - x)^2, the
// largest |dq - x| and the first element holding it, and the non-finite counts, over the
// elements the block quantizer (formats/rne_block_quantizer.hpp) codes, observed as they are
// coded (no dequantized array). The same definitions as the scan probe's quantize()-based path.
//
// Layers: metrics on formats. The quantizer knows nothing of these sums; it hands each coded
// vector to quant_error_sums::lanes, and this library instantiates it with them
// (quant_error_sums.cpp).
//
// Accuracy: each strip (one block row) accumulates x^2 and (dq - x)^2 in four double lanes, in
// an order fixed by the geometry (row by row, block by block, four elements at a time), then
// adds the lanes as (l0 + l1) + (l2 + l3) to the running sums. Every term is >= 0, so the
// relative error of a strip sum is at most (n / 4 + 2) u, u = 2^-53, and the sum over strips
// adds one rounding per strip: tighter than the (n - 1) u of the one-by-one sum over the whole
// tensor that quantize()-based code computes. Counts, maxima and the first index of the
// largest error are exact.
//
// The bulk (issue 17): quant_bulk_error_sums adds the same two sums again over the elements with
// |x| < a bound (the scan's magnitude percentile, probes/scan/scan_bulk.cpp), in the same lanes and
// order, so with the same accuracy; its tensor sums are quant_error_sums' to the bit. The scan
// codes the strips it measures the bulk on with it and the others with quant_error_sums, which
// costs nothing extra. The quantizer default-constructs the lanes once per strip and knows
// nothing of a bound, so the bound is the calling thread's, set by a bulk_scope for the strips
// coded inside it (0 outside any scope: no element is in the bulk).
//
// Private to numprobe (the probes and tests use it): not installed.
#include <cstdint>
#include <span>

#include "src/formats/rne_block_quantizer.hpp"

namespace numprobe::metrics {

struct quant_error_lanes;         // quant_error_sums.cpp
struct quant_bulk_error_lanes;    // quant_error_sums.cpp
struct quant_output_error_lanes;  // quant_error_sums.cpp

// Sums over finite inputs whose dequantized value is finite (non-finite ones are counted).
struct quant_error_sums {
  using lanes = quant_error_lanes;  // the block quantizer's observer of one strip
  double sum_sq = 0.0, sum_sq_err = 0.0;  // sum_sq_err: inf once an output is non-finite
  double max_err = -1.0;         // -1: no finite element yet
  std::int64_t max_err_at = -1;  // flat index of the first element holding max_err
  std::int64_t nonfinite_inputs = 0, nonfinite_outputs = 0;
};

// The same sums, and apart over the bulk: the finite elements with |x| below the thread's bound.
struct quant_bulk_error_sums : quant_error_sums {
  using lanes = quant_bulk_error_lanes;
  double bulk_sum_sq = 0.0, bulk_sum_sq_err = 0.0;  // bulk_sum_sq_err: inf with sum_sq_err
};

// The output error (issue 17, scan --act-stats): the bulk sums, and the same two sums again with
// each element weighted by its column's weight w_j (the input channel's mean square activation
// E[x_j^2]): sum w_j x^2 and sum w_j (dq - x)^2, in the same lanes and order, so with the accuracy
// above plus one rounding per product. The weights are the thread's, set by an
// output_weights_scope; the lanes find each element's column from the observer contract's fixed
// order (rne_block_quantizer.hpp: row by row, block by block, four elements at a time), so the
// quantizer stays column-blind. out_sum_sq_err: inf with sum_sq_err.
struct quant_output_error_sums : quant_bulk_error_sums {
  using lanes = quant_output_error_lanes;
  double out_sum_sq = 0.0, out_sum_sq_err = 0.0;
};

// Sets this thread's column weights for the strips coded while it lives (restores the previous
// ones): `weights` holds cols finite values >= 0 and then at least 3 zeros (a partial vector's
// lanes past the last column read them, masked); blocks are block_cols wide.
class output_weights_scope {
 public:
  output_weights_scope(const double* weights, std::int64_t cols, std::int64_t block_cols);
  ~output_weights_scope();
  output_weights_scope(const output_weights_scope&) = delete;
  output_weights_scope& operator=(const output_weights_scope&) = delete;

 private:
  const double* m_weights;
  std::int64_t m_cols, m_block_cols;
};

// Sets this thread's bulk bound for the strips coded while it lives (restores the previous one).
class bulk_scope {
 public:
  explicit bulk_scope(double below);
  ~bulk_scope();
  bulk_scope(const bulk_scope&) = delete;
  bulk_scope& operator=(const bulk_scope&) = delete;

 private:
  double m_previous;
};

}  // namespace numprobe::metrics

namespace numprobe::formats::detail {
// strip() with these sums: the strip's errors are added to `errors`, and when the strip moved
// max_err_at, the block holding it is filled in too (summary mode).
extern template void rne_block_quantizer::strip<metrics::quant_error_sums>(
    const void*, element_storage, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
    std::span<block_stats>, metrics::quant_error_sums&, strip_summary*) const;
extern template void rne_block_quantizer::strip<metrics::quant_bulk_error_sums>(
    const void*, element_storage, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
    std::span<block_stats>, metrics::quant_bulk_error_sums&, strip_summary*) const;
extern template void rne_block_quantizer::strip<metrics::quant_output_error_sums>(
    const void*, element_storage, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
    std::span<block_stats>, metrics::quant_output_error_sums&, strip_summary*) const;
}  // namespace numprobe::formats::detail
