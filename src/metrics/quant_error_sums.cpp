// The scan's quantization error sums (quant_error_sums.hpp): the lane accumulators the block
// quantizer hands its coded vectors to, and the quantizer's strip() instantiated with them.
#include "src/metrics/quant_error_sums.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "src/formats/rne_block_quantizer_strip.hpp"
#include "src/formats/rne_lane_codec.hpp"
#include "src/formats/simd_v4.hpp"

namespace numprobe::metrics {

namespace fd = formats::detail;
using fd::splat;
using fd::splat_i;
using fd::v4d;
using fd::v4i;

namespace {
thread_local double t_bulk_below = 0.0;  // bulk_scope's bound (quant_error_sums.hpp)
// output_weights_scope's column weights (quant_error_sums.hpp).
struct column_weights {
  const double* weights = nullptr;
  std::int64_t cols = 0, block_cols = 1;
};
thread_local column_weights t_column_weights;
}  // namespace

bulk_scope::bulk_scope(double below) : m_previous(t_bulk_below) { t_bulk_below = below; }
bulk_scope::~bulk_scope() { t_bulk_below = m_previous; }

output_weights_scope::output_weights_scope(const double* weights, std::int64_t cols, std::int64_t block_cols)
    : m_weights(t_column_weights.weights), m_cols(t_column_weights.cols), m_block_cols(t_column_weights.block_cols) {
  t_column_weights = {weights, cols, block_cols};
}
output_weights_scope::~output_weights_scope() { t_column_weights = {m_weights, m_cols, m_block_cols}; }

struct quant_error_lanes {
  v4d sx = splat(0.0), se = splat(0.0), maxe = splat(-1.0);
  v4i nonfinite_out = splat_i(0);

  // Four finite inputs with finite dequantized values (the full-block row path). fd::fmadd:
  // the same rounding whatever the compiler's contraction setting.
  void add(v4d x, v4d dq) {
    const v4d d = dq - x;
    sx = fd::fmadd(x, x, sx);
    se = fd::fmadd(d, d, se);
    maxe = fd::vmax(maxe, fd::vabs(d));
  }
  // The masked form: lanes outside `finite` add nothing; a finite input whose dequantized
  // value is not finite is counted, and excluded from the sums.
  void add(v4d x, v4d dq, v4i finite) {
    const v4d e = fd::vabs(dq - x);
    const v4i fdq = fd::vabs(dq) < splat(fd::k_inf);
    const v4i ok = finite & fdq;
    const v4d zero = splat(0.0);
    sx += ok ? x * x : zero;
    se += ok ? e * e : zero;
    maxe = fd::vmax(maxe, ok ? e : splat(-1.0));
    nonfinite_out += (finite & ~fdq) & splat_i(1);
  }

  // The strip's lanes into `s`. When the strip's largest error beats s.max_err, finds the first
  // element (row-major, row by row, block by block) holding it: the segment by its largest
  // error under the same vector code, then the element by the same operations in one lane.
  // Returns the index of that element's block in the strip, else -1.
  template <class Segments>
  std::int64_t add_to(quant_error_sums& s, std::int64_t nonfinite_inputs, const Segments& segs) const {
    s.sum_sq += fd::hsum(sx);
    s.sum_sq_err += fd::hsum(se);
    const std::int64_t nonfinite_outputs = fd::hsum(nonfinite_out);
    s.nonfinite_inputs += nonfinite_inputs;
    s.nonfinite_outputs += nonfinite_outputs;
    if (nonfinite_outputs > 0) s.sum_sq_err = fd::k_inf;
    const double mx = fd::hmax(maxe);
    if (!(mx > s.max_err)) return -1;
    for (std::int64_t r = segs.row0; r < segs.row0 + segs.nrows; ++r)
      for (std::int64_t j = 0; j < segs.blocks; ++j) {
        quant_error_lanes seg;
        segs.code(r, j, [&](v4d x, const fd::lane_code& c) { seg.add(x, c.dq, c.finite); });
        if (fd::hmax(seg.maxe) != mx) continue;
        const std::int64_t at = segs.at(r, j);
        for (std::int64_t q = 0; q < segs.width(j); ++q) {
          quant_error_lanes one;
          segs.code_one(j, at + q, [&](v4d x, const fd::lane_code& c) { one.add(x, c.dq, c.finite); });
          if (one.maxe[0] == mx) {
            s.max_err = mx;
            s.max_err_at = at + q;
            return j;
          }
        }
      }
    return -1;
  }
};

// quant_error_lanes, and the bulk's two sums beside them (the same terms, masked by |x| < below).
struct quant_bulk_error_lanes {
  quant_error_lanes all;
  v4d bx = splat(0.0), be = splat(0.0), below = splat(t_bulk_below);

  void add(v4d x, v4d dq) {
    all.add(x, dq);
    const v4d d = dq - x, zero = splat(0.0);
    const v4i bulk = fd::vabs(x) < below;
    const v4d xb = bulk ? x : zero, db = bulk ? d : zero;
    bx = fd::fmadd(xb, xb, bx);
    be = fd::fmadd(db, db, be);
  }
  void add(v4d x, v4d dq, v4i finite) {
    all.add(x, dq, finite);
    const v4d e = fd::vabs(dq - x), zero = splat(0.0);
    const v4i bulk = finite & (fd::vabs(dq) < splat(fd::k_inf)) & (fd::vabs(x) < below);
    bx += bulk ? x * x : zero;
    be += bulk ? e * e : zero;
  }
  template <class Segments>
  std::int64_t add_to(quant_bulk_error_sums& s, std::int64_t nonfinite_inputs, const Segments& segs) const {
    s.bulk_sum_sq += fd::hsum(bx);
    s.bulk_sum_sq_err += fd::hsum(be);
    if (fd::hsum(all.nonfinite_out) > 0) s.bulk_sum_sq_err = fd::k_inf;
    return all.add_to(s, nonfinite_inputs, segs);
  }
};

// quant_bulk_error_lanes, and the weighted sums beside them. The column cursor follows the
// observer contract's order: a strip starts at column 0 of its first row; each vector covers
// four columns of one block (a block's last vector may be partial, its extra lanes masked), the
// next block starts at the block boundary, and the row after the last block at column 0.
struct quant_output_error_lanes {
  quant_bulk_error_lanes bulk;
  v4d wx = splat(0.0), we = splat(0.0);
  const double* weights = t_column_weights.weights;
  std::int64_t cols = t_column_weights.cols, block_cols = t_column_weights.block_cols;
  std::int64_t col = 0, block_end = std::min(block_cols, cols);
  // Strips whose bulk is not measured (bound 0: no element is in it) skip the bulk lanes, whose
  // sums then add +0, as the plain lanes' would.
  bool bulk_on = t_bulk_below > 0.0;

  // The weights of the next vector's four columns, and the cursor moved past them.
  v4d next_weights() {
    v4d w;
    std::memcpy(&w, weights + col, sizeof w);
    col += 4;
    if (col >= block_end) {
      col = block_end == cols ? 0 : block_end;
      block_end = std::min(col + block_cols, cols);
    }
    return w;
  }
  void add(v4d x, v4d dq) {
    if (bulk_on) bulk.add(x, dq);
    else bulk.all.add(x, dq);
    const v4d w = next_weights(), d = dq - x;
    wx = fd::fmadd(x * x, w, wx);
    we = fd::fmadd(d * d, w, we);
  }
  void add(v4d x, v4d dq, v4i finite) {
    if (bulk_on) bulk.add(x, dq, finite);
    else bulk.all.add(x, dq, finite);
    const v4d w = next_weights(), e = dq - x, zero = splat(0.0);
    const v4i ok = finite & (fd::vabs(dq) < splat(fd::k_inf));
    wx += ok ? (x * x) * w : zero;
    we += ok ? (e * e) * w : zero;
  }
  template <class Segments>
  std::int64_t add_to(quant_output_error_sums& s, std::int64_t nonfinite_inputs, const Segments& segs) const {
    s.out_sum_sq += fd::hsum(wx);
    s.out_sum_sq_err += fd::hsum(we);
    if (fd::hsum(bulk.all.nonfinite_out) > 0) s.out_sum_sq_err = fd::k_inf;
    return bulk.add_to(s, nonfinite_inputs, segs);
  }
};

}  // namespace numprobe::metrics

namespace numprobe::formats::detail {
template void rne_block_quantizer::strip<metrics::quant_error_sums>(
    const void*, element_storage, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
    std::span<block_stats>, metrics::quant_error_sums&, strip_summary*) const;
template void rne_block_quantizer::strip<metrics::quant_bulk_error_sums>(
    const void*, element_storage, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
    std::span<block_stats>, metrics::quant_bulk_error_sums&, strip_summary*) const;
template void rne_block_quantizer::strip<metrics::quant_output_error_sums>(
    const void*, element_storage, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
    std::span<block_stats>, metrics::quant_output_error_sums&, strip_summary*) const;
}  // namespace numprobe::formats::detail
