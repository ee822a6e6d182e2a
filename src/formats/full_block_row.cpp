// The full-block row path's last step (full_block_row.hpp): block statistics from the
// per-block arrays, and the strip summary with its outlier flushes.
#include <algorithm>
#include <bit>
#include <cstring>

#include "src/formats/full_block_row.hpp"

namespace numprobe::formats::detail {

void finish_full_block_row(const row_scratch& w, const element_rounding& er, double unit,
                           double flush_ratio, std::int64_t cols, std::int64_t row,
                           std::int64_t bcols, std::span<block_stats> blocks, bool scaled,
                           strip_summary* summary, std::int64_t also) {
  const auto nb = static_cast<std::int64_t>(blocks.size());
  const std::int64_t base = row * cols;
  const double* const xrow = w.x.data();
  const row_source src{xrow, base};
  // The first element of block j equal to its amax, 64 elements at a time (one mask word, no
  // branch per vector).
  const auto argmax_of = [&](std::int64_t j) {
    const std::int64_t at = base + j * bcols;
    const double seg = w.amax[static_cast<std::size_t>(j)];
    for (std::int64_t k0 = 0; k0 < bcols; k0 += 64) {
      std::uint64_t bits = 0;
      for (std::int64_t k = k0; k < std::min<std::int64_t>(bcols, k0 + 64); k += 4)
        bits |= std::uint64_t{equal_bits(vabs(src.load(at + k)), seg)} << (k - k0);
      if (bits != 0) return at + k0 + std::countr_zero(bits);
    }
    return at;  // not reached: the amax is one of the block's elements
  };
  const auto fill = [&](std::int64_t j) {
    const auto jj = static_cast<std::size_t>(j);
    block_stats& b = blocks[jj];  // every field written
    b.row0 = row;
    b.col0 = j * bcols;
    b.rows = 1;
    b.cols = bcols;
    b.amax = w.amax[jj];
    b.argmax = argmax_of(j);
    b.scale = w.scale[jj];
    b.scale_code = static_cast<std::uint32_t>(w.code[jj]);
    b.zero_point = 0;
    b.flushed = w.flushed[jj];
    b.clipped = w.clipped[jj];
    b.nonfinite = 0;
    b.scale_underflow = w.underflow[jj] != 0;
  };
  if (!summary) {
    for (std::int64_t j = 0; j < nb; ++j) fill(j);
    return;
  }
  // The summary from the per-block arrays: totals four blocks at a time, then the outlier
  // flushes (outlier_flushes.hpp) of each block that flushed, from the widened row, and the
  // worst outlier block by add_to_summary's rules.
  strip_summary& sm = *summary;
  v4i tf = splat_i(0), tc = splat_i(0), tu = splat_i(0);
  std::int64_t j2 = 0;
  for (; j2 + 4 <= nb; j2 += 4) {
    const auto jj = static_cast<std::size_t>(j2);
    v4i32 f32, c32;
    std::memcpy(&f32, &w.flushed[jj], sizeof f32);
    std::memcpy(&c32, &w.clipped[jj], sizeof c32);
    v4i under;
    std::memcpy(&under, &w.underflow[jj], sizeof under);
    tf += __builtin_convertvector(f32, v4i);
    tc += __builtin_convertvector(c32, v4i);
    tu -= under != splat_i(0);
  }
  sm.flushed += hsum(tf);
  sm.clipped += hsum(tc);
  sm.scale_underflow += hsum(tu);
  for (std::int64_t j = j2; j < nb; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    sm.flushed += w.flushed[jj];
    sm.clipped += w.clipped[jj];
    sm.scale_underflow += w.underflow[jj] != 0 ? 1 : 0;
  }
  // The outlier flushes of block j, four lanes at a time: outlier_block_flushes() (the one
  // definition) on the widened row, with the argmax exclusion done by counting: amax2 is amax
  // when two elements hold amax, else the largest finite |x| below it. test_rne_block_quantizer
  // checks the counts against outlier_block_flushes() on quantize()'s result.
  const auto outliers_of = [&](std::int64_t j) -> std::int32_t {
    const auto jj = static_cast<std::size_t>(j);
    const double amax = w.amax[jj];
    if (!(amax > 0.0) || !(amax < k_inf)) return 0;
    const double* xb = xrow + j * bcols;
    v4d m2 = splat(-1.0);
    v4i eq = splat_i(0);
    for (std::int64_t k = 0; k < bcols; k += 4) {
      v4d a;
      std::memcpy(&a, xb + k, sizeof a);
      a = vabs(a);
      eq -= a == splat(amax);
      m2 = vmax(m2, a < splat(amax) ? a : splat(-1.0));
    }
    const double amax2 = hsum(eq) >= 2 ? amax : std::max(0.0, hmax(m2));
    if (amax2 == 0.0) return 0;
    const double survive = flush_ratio * w.scale[jj] * (amax2 / amax);
    const block_coder bc(w.scale[jj], unit, er);
    v4i n = splat_i(0);
    for (std::int64_t k = 0; k < bcols; k += 4) {
      v4d x;
      std::memcpy(&x, xb + k, sizeof x);
      const v4d a = vabs(x);
      n -= (a > splat(survive)) & (a < splat(k_inf)) & (er.round(bc.quotient(x)) == splat(0.0));
    }
    return static_cast<std::int32_t>(hsum(n));
  };
  std::int64_t worst = -1;
  std::int32_t worst_f = 0;
  for (std::int64_t j = 0; j < nb; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    if (!scaled || w.underflow[jj] != 0 || w.flushed[jj] == 0) continue;
    const std::int32_t of = outliers_of(j);
    if (of <= 0) continue;
    ++sm.outlier_blocks;
    sm.outlier_flushed += of;
    if (worst < 0 || of > worst_f || (of == worst_f && w.amax[jj] > w.amax[static_cast<std::size_t>(worst)])) {
      worst = j;
      worst_f = of;
    }
  }
  sm.worst_outlier_flushed = worst_f;
  sm.worst = worst;
  if (worst >= 0) fill(worst);
  if (also >= 0) fill(also);
}

}  // namespace numprobe::formats::detail
