#pragma once
// Block quantization by round-to-nearest-even on the bit pattern, four lanes at a time, for
// the streaming scan path (the scan probe, bench_io's quantization analysis): what
// formats::quantize() gives per block (block_stats), reading f64/f32/bf16/f16 elements in
// place (a memory map), with no codes or dequantized values materialised. Each coded element
// is handed to an error observer (below) as it is made; metrics/quant_error_sums.hpp is the
// one the scan uses.
//
// The algorithm, per block row (a strip): pass 1 takes every block's amax; the scale rule
// (block_scale_rule.hpp) gives the scales; pass 2 codes every element against its block's
// scale (rne_lane_codec.hpp). Rows of full blocks without non-finite values take a path
// without masks (full_block_row.hpp); everything else the masked path (masked_strip.hpp).
//
// Exactness: every element is coded with the same IEEE operations quantize() uses (t = x /
// scale, or x * (1 / scale) where the scale is a power of two, which is the same correctly
// rounded quotient), and t is rounded to the element format by integer rounding of its bit
// pattern (normals) or by adding and subtracting q * 2^52 (subnormals, q the format's
// quantum), which are the RNE roundings fast_codec.cpp proves against the reference codec;
// see rne_lane_codec.hpp. tests/formats/test_rne_block_quantizer.cpp checks every block
// statistic against quantize() exactly and the error sums to a stated bound, for every
// covered scheme.
//
// Covered: round-to-nearest-even, saturating overflow, element formats of at most 8 bits with
// a bit codec (fp8, fp6, fp4, int8, int4), every scheme kind except asymmetric (zero point).
// Private to numprobe (the probes and tests use it): not installed.
#include <cstddef>
#include <cstdint>
#include <span>

#include "numprobe/formats/scheme.hpp"
#include "src/formats/block_scale_rule.hpp"

namespace numprobe::formats::detail {

// How the elements are stored (row-major).
enum class element_storage : std::uint8_t { m_f64, m_f32, m_bf16, m_f16 };

// Totals over a strip's blocks, and its outlier blocks and outlier flushes (the one definition,
// numprobe/formats/outlier_flushes.hpp). worst: the index in the strip's span of the first
// outlier block with the most outlier flushes, then the largest amax (-1: none), and
// worst_outlier_flushed its outlier flushes.
struct strip_summary {
  std::int64_t flushed = 0, clipped = 0, scale_underflow = 0;
  std::int64_t outlier_blocks = 0, outlier_flushed = 0;
  std::int64_t worst = -1, worst_outlier_flushed = 0;
};

// An error observer E of strip() names a lane accumulator type E::lanes (complete where
// strip<E> is instantiated: rne_block_quantizer_strip.hpp), default-constructed per strip and
// copyable, with
//   void add(v4d x, v4d dq)              four finite inputs and their finite dequantized values
//   void add(v4d x, v4d dq, v4i finite)  the masked form: `finite` the finite, valid inputs
//   std::int64_t add_to(E& e, std::int64_t nonfinite_inputs, const strip_segments<S, F>& s)
//       const                            at the strip's end: the lanes into e; returns the
//                                        index in the strip of a block it wants filled in
//                                        (summary mode), or -1
// The lanes' order is fixed by the geometry alone (row by row, block by block, four elements
// at a time), so an observer's result does not depend on how callers spread strips over
// threads.
class rne_block_quantizer {
 public:
  // Whether this quantizer reproduces quantize() for this configuration.
  [[nodiscard]] static bool covers(const scheme_config& c);
  // The largest finite |x| of n elements (0 when there is none).
  [[nodiscard]] static double finite_amax(const void* data, element_storage in, std::size_t n);
  // Element i of the array, exactly (f16 and bf16 widen exactly to double).
  [[nodiscard]] static double element(const void* data, element_storage in, std::size_t i);

  explicit rne_block_quantizer(const scheme_config& c);  // c must be covered

  // A scale set by the whole tensor while the tensor is processed in row bands: NVFP4's s_t
  // is derived from `amax` exactly as quantize() derives it from the whole tensor, and the
  // `tensor` kind's single scale from `amax` instead of each band's own amax (the band's
  // block then reports amax = `amax`, and argmax only where the band holds it).
  void set_tensor_amax(double amax);
  [[nodiscard]] double tensor_scale() const { return m_rule.tensor_scale; }

  // Quantizes the block row [row0, row0 + nrows) (all columns) of the row-major array `data`
  // with `cols` columns, blocks `block_cols` wide: fills `blocks` (ceil(cols / block_cols)
  // entries, coordinates in `data`'s frame) as quantize() does, and hands every coded element
  // to `errors` (flat indices in `data`). With `summary`, also fills it for this strip, and
  // `blocks` need then hold only the entries the caller looks at: blocks[summary->worst]
  // (when >= 0) and the block the observer asks for; the others may be left as they were.
  // Instantiated by each observer's library (metrics/quant_error_sums.cpp).
  template <class Errors>
  void strip(const void* data, element_storage in, std::int64_t cols, std::int64_t row0,
             std::int64_t nrows, std::int64_t block_cols, std::span<block_stats> blocks,
             Errors& errors, strip_summary* summary = nullptr) const;

  // Codes the block row as strip() does and writes what quantize() stores per element: codes[i]
  // (the element format's bit pattern, one byte: fp4/fp6/int4 codes in the low bits) and
  // dequant[i], flat indices in `data`'s frame, with every entry of `blocks` filled. For
  // `convert --write`, which needs the codes that strip() never makes.
  // rne_block_quantizer_codes.cpp; tests/formats/test_rne_block_codes.cpp checks codes, scales
  // and dequantized values against quantize() bit for bit.
  void code_strip(const void* data, element_storage in, std::int64_t cols, std::int64_t row0,
                  std::int64_t nrows, std::int64_t block_cols, std::span<block_stats> blocks,
                  std::uint8_t* codes, double* dequant) const;

  // The dequantized value of a finite element x of block b (as quantize() would store it).
  [[nodiscard]] double dequant(double x, const block_stats& b) const;

 private:
  template <class S>
  void code_strip_typed(const S& src, std::int64_t cols, std::int64_t row0, std::int64_t nrows,
                        std::int64_t block_cols, std::span<block_stats> blocks, std::uint8_t* codes,
                        double* dequant) const;
  template <class S, class Errors>
  void strip_typed(const S& src, std::int64_t cols, std::int64_t row0, std::int64_t nrows,
                   std::int64_t block_cols, std::span<block_stats> blocks, Errors& errors,
                   strip_summary* summary) const;

  block_scale_rule m_rule;
  double m_unit = 1.0;  // MXINT8: 2^-6
  double m_flush_ratio = 0.0;  // formats::flush_ratio(c)
  double m_tensor_amax = -1.0;  // `tensor` kind: the imposed amax (< 0: the block's own)
  element_rounding m_er;
};

}  // namespace numprobe::formats::detail
