// The scan's quantization error sums (quant_error_sums.hpp): the lane accumulators the block
// quantizer hands its coded vectors to, and the quantizer's strip() instantiated with them.
#include "src/metrics/quant_error_sums.hpp"

#include <cstdint>

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
}  // namespace

bulk_scope::bulk_scope(double below) : m_previous(t_bulk_below) { t_bulk_below = below; }
bulk_scope::~bulk_scope() { t_bulk_below = m_previous; }

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

}  // namespace numprobe::metrics

namespace numprobe::formats::detail {
template void rne_block_quantizer::strip<metrics::quant_error_sums>(
    const void*, element_storage, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
    std::span<block_stats>, metrics::quant_error_sums&, strip_summary*) const;
template void rne_block_quantizer::strip<metrics::quant_bulk_error_sums>(
    const void*, element_storage, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
    std::span<block_stats>, metrics::quant_bulk_error_sums&, strip_summary*) const;
}  // namespace numprobe::formats::detail
