#pragma once
// A finished strip's elements, segment by segment, for an error observer that looks back at
// them (metrics/quant_error_sums.hpp: the first index of the largest error): segment (r, j) is
// the elements of block j in row r, coded again with the same operations as the strip.
//
// Private to numprobe (the block quantizer and its observers): not installed.
#include <algorithm>
#include <cstdint>

#include "src/formats/element_loads.hpp"
#include "src/formats/rne_lane_codec.hpp"

namespace numprobe::formats::detail {

// ScaleOf: j -> block j's scale.
template <class S, class ScaleOf>
struct strip_segments {
  const S& src;
  const element_rounding& er;
  double unit;
  std::int64_t cols, row0, nrows, blocks, block_cols;
  ScaleOf scale_of;

  [[nodiscard]] std::int64_t at(std::int64_t r, std::int64_t j) const { return r * cols + j * block_cols; }
  [[nodiscard]] std::int64_t width(std::int64_t j) const { return std::min(block_cols, cols - j * block_cols); }
  [[nodiscard]] block_coder coder(std::int64_t j) const { return block_coder(scale_of(j), unit, er); }
  // f(x, code) over segment (r, j), four elements at a time (the last vector's lanes beyond
  // the segment are 0 and not in code.finite).
  template <class F>
  void code(std::int64_t r, std::int64_t j, F&& f) const {
    const block_coder bc = coder(j);
    const std::int64_t a = at(r, j), w = width(j);
    std::int64_t k = 0;
    for (; k + 4 <= w; k += 4) {
      const v4d x = src.load(a + k);
      f(x, code_lanes(er, bc, x, splat_i(-1)));
    }
    if (k < w) {
      const v4d x = load_part(src, a + k, w - k);
      f(x, code_lanes(er, bc, x, lanes_below(w - k)));
    }
  }
  // f(splat(x), code) for the element at flat index i of block j, in every lane.
  template <class F>
  void code_one(std::int64_t j, std::int64_t i, F&& f) const {
    const v4d x = splat(src.at(i));
    f(x, code_lanes(er, coder(j), x, splat_i(-1)));
  }
};

template <class S, class ScaleOf>
strip_segments(const S&, const element_rounding&, double, std::int64_t, std::int64_t, std::int64_t,
               std::int64_t, std::int64_t, ScaleOf) -> strip_segments<S, ScaleOf>;

}  // namespace numprobe::formats::detail
