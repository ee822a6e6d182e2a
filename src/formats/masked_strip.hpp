#pragma once
// The block quantizer's general strip path (rne_block_quantizer.hpp): any block height and
// width, partial blocks and vectors, non-finite inputs and outputs, an imposed amax. Every
// lane is masked.
//
// Private to numprobe (the block quantizer): not installed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "src/formats/block_scale_rule.hpp"
#include "src/formats/element_loads.hpp"
#include "src/formats/rne_lane_codec.hpp"

namespace numprobe::formats::detail {

// Codes the strip [row0, row0 + nrows) into `blocks` (every field) and hands every element to
// `lanes`; returns the strip's count of non-finite inputs.
template <class S, class Lanes>
std::int64_t masked_strip(const S& src, const element_rounding& er, double unit,
                          double imposed_amax, const block_scale_rule& rule, std::int64_t cols,
                          std::int64_t row0, std::int64_t nrows, std::int64_t bcols,
                          std::span<block_stats> blocks, Lanes& lanes) {
  const auto nb = static_cast<std::int64_t>(blocks.size());
  for (std::int64_t j = 0; j < nb; ++j) {
    block_stats& b = blocks[static_cast<std::size_t>(j)];
    b = block_stats{};
    b.row0 = row0;
    b.col0 = j * bcols;
    b.rows = nrows;
    b.cols = std::min(bcols, cols - b.col0);
    b.amax = -1.0;  // running; no finite element yet
  }
  // Pass 1: amax, the first element holding it (row-major within the block), non-finite count.
  std::int64_t nonfinite_in = 0;
  for (std::int64_t r = row0; r < row0 + nrows; ++r) {
    const std::int64_t base = r * cols;
    for (std::int64_t j = 0; j < nb; ++j) {
      block_stats& b = blocks[static_cast<std::size_t>(j)];
      const std::int64_t at = base + b.col0, w = b.cols;
      v4d m = splat(-1.0);
      v4i nf = splat_i(0);
      std::int64_t k = 0;
      for (; k + 4 <= w; k += 4) {
        const v4d a = vabs(src.load(at + k));
        const v4i fin = a < splat(k_inf);
        m = vmax(m, fin ? a : splat(-1.0));
        nf += ~fin & splat_i(1);
      }
      if (k < w) {
        const v4i valid = lanes_below(w - k);
        const v4d a = vabs(load_part(src, at + k, w - k));
        const v4i fin = (a < splat(k_inf)) & valid;
        m = vmax(m, fin ? a : splat(-1.0));
        nf += (valid & ~fin) & splat_i(1);
      }
      const double seg = hmax(m);
      if (seg > b.amax) {
        b.amax = seg;
        for (std::int64_t q = 0; q < w; ++q)
          if (std::fabs(src.at(at + q)) == seg) {
            b.argmax = at + q;
            break;
          }
      }
      const auto n = static_cast<std::int32_t>(hsum(nf));
      b.nonfinite += n;
      nonfinite_in += n;
    }
  }
  for (auto& b : blocks) {
    if (b.amax < 0) b.amax = 0.0;  // no finite element: argmax stays -1
    if (imposed_amax >= 0) {
      if (b.amax != imposed_amax) b.argmax = -1;
      b.amax = imposed_amax;
    }
    rule(b);
  }
  // Pass 2: code every element against its block's scale.
  for (std::int64_t r = row0; r < row0 + nrows; ++r) {
    const std::int64_t base = r * cols;
    for (std::int64_t j = 0; j < nb; ++j) {
      block_stats& b = blocks[static_cast<std::size_t>(j)];
      const block_coder bc(b, unit, er);
      const std::int64_t at = base + b.col0, w = b.cols;
      v4i counts = splat_i(0);
      const auto code = [&](v4d x, v4i valid) {
        const lane_code c = code_lanes(er, bc, x, valid);
        lanes.add(x, c.dq, c.finite);
        count_flushes_and_clips(er, x, c, counts);
      };
      std::int64_t k = 0;
      for (; k + 4 <= w; k += 4) code(src.load(at + k), splat_i(-1));
      if (k < w) code(load_part(src, at + k, w - k), lanes_below(w - k));
      const std::int64_t c = hsum(counts);
      b.flushed += static_cast<std::int32_t>(c & 0xFFFFFFFF);
      b.clipped += static_cast<std::int32_t>(c >> 32);
    }
  }
  return nonfinite_in;
}

}  // namespace numprobe::formats::detail
