#pragma once
// The full-block row path's per-block values of one row (structure of arrays, reused across
// rows by each thread) and the row itself, widened to doubles.
//
// Private to numprobe (the block quantizer): not installed.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/formats/simd_v4.hpp"

namespace numprobe::formats::detail {

struct row_scratch {
  std::vector<double> x;
  std::vector<double> amax, scale, eff, div, inv;
  std::vector<std::int64_t> code;
  std::vector<std::int64_t> underflow;  // 0 or -1 (a vector mask)
  std::vector<std::int32_t> flushed, clipped;
  std::vector<v4i> flush_lanes, clip_lanes;  // pass 2's per-block lane counts (Abs rows)
  void resize(std::size_t n) {
    flush_lanes.resize(n);
    clip_lanes.resize(n);
    amax.resize(n);
    scale.resize(n);
    eff.resize(n);
    div.resize(n);
    inv.resize(n);
    code.resize(n);
    underflow.resize(n);
    flushed.resize(n);
    clipped.resize(n);
  }
};

// A row already widened to doubles (row_scratch::x), indexed as the array it came from.
struct row_source {
  const double* p;
  std::int64_t base;
  v4d load(std::int64_t i) const {
    v4d v;
    std::memcpy(&v, p + (i - base), sizeof v);
    return v;
  }
  double at(std::int64_t i) const { return p[i - base]; }
};

}  // namespace numprobe::formats::detail
