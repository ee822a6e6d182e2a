#pragma once
// Outlier-block flushes: the one definition every report uses (quant, scan, the scenario
// runners, the fused scan quantizer), from NUMERICS.md: "one outlier sets the block scale, and
// every neighbour below outlier/24 becomes 0. These are the outlier-block flushes."
//
// A flushed element (finite, non-zero input, zero output) of a scaled block counts as an
// outlier flush when it would have survived had the block's scale been set by the block's
// second-largest magnitude amax2 instead of its largest amax: the scale shrinks by amax2/amax,
// so the magnitude below which elements code to zero, flush_ratio * scale, shrinks by the same
// factor, and the element counts when |x| > flush_ratio * scale * amax2 / amax.
// An outlier block is a block with at least one outlier flush. Flushes that happen whatever the
// block maximum (the element is simply too small for the format) are not outlier flushes, and
// blocks whose scale itself underflowed are counted apart (scale_underflow).
#include <cmath>
#include <cstdint>

#include "numprobe/formats/scheme.hpp"

namespace numprobe::formats {

// The magnitude below which an element codes to zero, relative to the block's effective scale:
// half the smallest positive element value under RNE (e2m1: 0.25), half a step for integers
// (MXINT8 steps are 2^-6).
[[nodiscard]] double flush_ratio(const scheme_config& c);

// Whether block b can hold outlier flushes at all: a scale (kind != none) that did not
// underflow, set by one element (argmax >= 0), with a flush, in a block of more than one element.
[[nodiscard]] inline bool may_hold_outlier_flushes(scheme_kind kind, const block_stats& b) {
  return kind != scheme_kind::m_none && !b.scale_underflow && b.argmax >= 0 && b.flushed > 0 &&
         b.rows * b.cols > 1;
}

// The outlier flushes of block b, whose elements sit at flat indices r * cols + c (b.row0,
// b.col0, b.argmax in that frame). x(i) is element i's input value; flushed(i, x) says whether
// it coded to zero (x finite and non-zero is checked here).
// `ratio` is flush_ratio(config) of the scheme (taken once by callers that loop over blocks).
template <class X, class Flushed>
[[nodiscard]] std::int32_t outlier_block_flushes(scheme_kind kind, double ratio, const block_stats& b,
                                                 std::int64_t cols, X&& x, Flushed&& flushed) {
  if (!may_hold_outlier_flushes(kind, b)) return 0;
  double amax2 = 0.0;  // the largest finite magnitude other than the one at argmax
  for (std::int64_t r = b.row0; r < b.row0 + b.rows; ++r)
    for (std::int64_t c = b.col0; c < b.col0 + b.cols; ++c) {
      const std::int64_t i = r * cols + c;
      const double a = std::fabs(x(i));
      if (i != b.argmax && std::isfinite(a)) amax2 = std::max(amax2, a);
    }
  if (amax2 == 0.0 || !(b.amax > 0.0)) return 0;
  const double survive = ratio * b.scale * (amax2 / b.amax);
  std::int32_t n = 0;
  for (std::int64_t r = b.row0; r < b.row0 + b.rows; ++r)
    for (std::int64_t c = b.col0; c < b.col0 + b.cols; ++c) {
      const std::int64_t i = r * cols + c;
      const double v = x(i);
      if (std::isfinite(v) && v != 0.0 && std::fabs(v) > survive && flushed(i, v)) ++n;
    }
  return n;
}

template <class X, class Flushed>
[[nodiscard]] std::int32_t outlier_block_flushes(const scheme_config& config, const block_stats& b,
                                                 std::int64_t cols, X&& x, Flushed&& flushed) {
  return outlier_block_flushes(config.kind, flush_ratio(config), b, cols, x, flushed);
}

}  // namespace numprobe::formats
