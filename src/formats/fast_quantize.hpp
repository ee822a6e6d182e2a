#pragma once
// Fused block quantization and error analysis, vectorised, for the streaming scan path (the
// scan probe, bench_io's quantization analysis). It produces what formats::quantize() gives
// per block (block_stats) and the error sums the scan needs, without materialising codes or
// dequantized values, reading f64/f32/bf16/f16 elements in place (a memory map).
//
// Exactness: every element is coded with the same IEEE operations quantize() uses (t = x /
// scale, or x * (1 / scale) where the scale is a power of two, which is the same correctly
// rounded quotient), and t is rounded to the element format by integer rounding of its bit
// pattern (normals) or by adding and subtracting q * 2^52 (subnormals, q the format's
// quantum), which are the RNE roundings fast_codec.cpp proves against the reference codec;
// see fast_quantize.cpp. tests/formats/test_fast_quantize.cpp checks every block statistic
// against quantize() exactly and the error sums to a stated bound, for every covered scheme.
//
// Covered: round-to-nearest-even, saturating overflow, element formats of at most 8 bits with
// a bit codec (fp8, fp6, fp4, int8, int4), every scheme kind except asymmetric (zero point).
// Private to numprobe (the probes and tests use it): not installed.
#include <cstddef>
#include <cstdint>
#include <span>

#include "numprobe/formats/scheme.hpp"

namespace numprobe::formats::detail {

// How the elements are stored (row-major).
enum class fast_input : std::uint8_t { m_f64, m_f32, m_bf16, m_f16 };

// Error sums over finite inputs whose dequantized value is finite (non-finite ones are
// counted), the same definitions as the scan probe's.
struct fast_error_sums {
  double sum_sq = 0.0, sum_sq_err = 0.0;
  double max_err = -1.0;         // -1: no finite element yet
  std::int64_t max_err_at = -1;  // flat index of the first element holding max_err
  std::int64_t nonfinite_inputs = 0, nonfinite_outputs = 0;
};

// Totals over a strip's blocks, and its outlier blocks and outlier flushes (the one definition,
// numprobe/formats/outlier_flushes.hpp). worst: the index in the strip's span of the first
// outlier block with the most outlier flushes, then the largest amax (-1: none), and
// worst_outlier_flushed its outlier flushes.
struct fast_strip_summary {
  std::int64_t flushed = 0, clipped = 0, scale_underflow = 0;
  std::int64_t outlier_blocks = 0, outlier_flushed = 0;
  std::int64_t worst = -1, worst_outlier_flushed = 0;
};

class fast_quantizer {
 public:
  // Whether the fused path reproduces quantize() for this configuration.
  [[nodiscard]] static bool covers(const scheme_config& c);
  // The largest finite |x| of n elements (0 when there is none).
  [[nodiscard]] static double finite_amax(const void* data, fast_input in, std::size_t n);
  // Element i of the array, exactly (f16 and bf16 widen exactly to double).
  [[nodiscard]] static double element(const void* data, fast_input in, std::size_t i);

  explicit fast_quantizer(const scheme_config& c);  // c must be covered

  // A scale set by the whole tensor while the tensor is processed in row bands: NVFP4's s_t
  // is derived from `amax` exactly as quantize() derives it from the whole tensor, and the
  // `tensor` kind's single scale from `amax` instead of each band's own amax (the band's
  // block then reports amax = `amax`, and argmax only where the band holds it).
  void set_tensor_amax(double amax);
  [[nodiscard]] double tensor_scale() const { return m_tensor_scale; }

  // Quantizes the block row [row0, row0 + nrows) (all columns) of the row-major array `data`
  // with `cols` columns, blocks `block_cols` wide: fills `blocks` (ceil(cols / block_cols)
  // entries, coordinates in `data`'s frame) as quantize() does, and adds the rows' error sums
  // to `sums` (max_err_at: flat index in `data`). The lanes of the sums are fixed by the
  // geometry alone, so the result does not depend on how callers spread strips over threads.
  // With `summary`, also fills it for this strip, and `blocks` need then hold only the entries
  // the caller looks at: blocks[summary->worst] (when >= 0) and, when this strip moved
  // sums.max_err_at, the block holding it; the others may be left as they were.
  void strip(const void* data, fast_input in, std::int64_t cols, std::int64_t row0,
             std::int64_t nrows, std::int64_t block_cols, std::span<block_stats> blocks,
             fast_error_sums& sums, fast_strip_summary* summary = nullptr) const;

  // The dequantized value of a finite element x of block b (as quantize() would store it).
  [[nodiscard]] double dequant(double x, const block_stats& b) const;

 private:
  void block_scale(block_stats& b) const;
  template <class S>
  void strip_typed(const S& src, std::int64_t cols, std::int64_t row0, std::int64_t nrows,
                   std::int64_t block_cols, std::span<block_stats> blocks,
                   fast_error_sums& sums, fast_strip_summary* summary) const;

  scheme_config m_c;
  double m_unit = 1.0;  // MXINT8: 2^-6
  double m_flush_ratio = 0.0;  // formats::flush_ratio(m_c)
  double m_max_value = 0.0;  // element max * unit
  double m_tensor_scale = 1.0;
  double m_tensor_amax = -1.0;  // `tensor` kind: the imposed amax (< 0: the block's own)
  // Element rounding (see fast_quantize.cpp).
  bool m_integer = false;
  double m_elem_max = 0.0, m_elem_lowest = 0.0;
  double m_min_normal = 0.0, m_sub_magic = 0.0;
  std::uint64_t m_half_m1 = 0, m_drop = 0, m_low_mask = 0;
};

}  // namespace numprobe::formats::detail
