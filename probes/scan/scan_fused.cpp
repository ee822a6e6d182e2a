// The scan's fused path: the RNE block quantizer (src/formats/rne_block_quantizer.hpp) codes
// every band in place, with no decoded copy for in-memory sources and no codes or dequantized
// arrays at all; the error sums are metrics/quant_error_sums.
#include <exception>
#include <optional>

#include "numprobe/formats/outlier_flushes.hpp"
#include "probes/scan/scan_bands.hpp"
#include "src/metrics/quant_error_sums.hpp"

namespace numprobe::probes::detail {
namespace {

// What one band contributes; bands are combined in band order (scan_fused).
struct band_part {
  // The bulk's sums over the sampled strips only; the output error's (--act-stats) over all.
  metrics::quant_output_error_sums sums;
  std::int64_t blocks = 0, flushed = 0, clipped = 0, scale_underflow = 0;
  std::int64_t outlier_blocks = 0, outlier_flushed = 0;
  bool have_outlier = false;
  formats::block_stats outlier;  // the band's first worst outlier block (band coordinates)
  std::int64_t outlier_worst_flushes = 0;  // its outlier flushes
  formats::block_stats max_err_block;  // the block holding sums.max_err_at
  std::exception_ptr error;
};

// True when block b (bf outlier flushes) is worse than w (wf): more outlier flushes, then the
// larger amax (the quant probe's rule).
bool worse_outlier(const formats::block_stats& b, std::int64_t bf, const formats::block_stats& w,
                   std::int64_t wf) {
  return bf > wf || (bf == wf && b.amax > w.amax);
}

}  // namespace

// The fused path (formats/rne_block_quantizer.hpp): every band is coded in place, block row by block
// row, with no decoded copy for in-memory sources and no codes or dequantized arrays at all.
// Bands are fixed by band_elements (not by the thread count) and run in parallel, each into
// its own band_part; the parts are then combined on one thread in band order, with the same
// first-wins rules as the sequential loop, so the result is identical for any thread count.
// The statistics equal the quantize()-based path's (tests/probes/test_scan.cpp): counts,
// maxima and worked blocks exactly, error sums within the bound in metrics/quant_error_sums.hpp. One
// difference, a fix: a banded `tensor` scan no longer counts the sentinel row's element (the
// tensor amax, which may code as clipped) in its band, and a band without the tensor's amax
// reports no argmax instead of the sentinel's index.
scan_scheme_result scan_fused(const formats::scheme_config& c, scan_scheme_result r,
                              std::int64_t rows, std::int64_t cols, const row_source& src,
                              std::int64_t band, const scan_magnitudes& m) {
  rne_block_quantizer fq(c);
  const std::int64_t bands = (rows + band - 1) / band;
  const int slots = max_threads();
  std::vector<std::vector<double>> bufs(src.data ? 0 : static_cast<std::size_t>(slots));
  std::vector<std::exception_ptr> errors(bands);
  const std::size_t elem_bytes = element_bytes(src.type);
  // A band's bytes back to the kernel once a pass is done with them (in-place data only).
  const auto release_band = [&](std::int64_t k) {
    if (!src.data || !src.release || !*src.release) return;
    const std::int64_t r0 = k * band, nr = std::min(band, rows - r0);
    (*src.release)(static_cast<std::size_t>(r0 * cols) * elem_bytes, static_cast<std::size_t>(nr * cols) * elem_bytes);
  };
  const auto band_data = [&](std::int64_t k, std::size_t t, const void*& data, element_storage& in) {
    const std::int64_t r0 = k * band, nr = std::min(band, rows - r0);
    if (src.data) {
      data = src.data + static_cast<std::size_t>(r0 * cols) * elem_bytes;
      in = src.type;
      return;
    }
    auto& buf = bufs[t];
    buf.resize(static_cast<std::size_t>(nr * cols));
    (*src.fetch)(r0, nr, buf);
    data = buf.data();
    in = element_storage::m_f64;
  };
  if (c.kind == scheme_kind::m_nvfp4 || c.kind == scheme_kind::m_tensor) {
    // The tensor's amax (max is exact and order-free, so the bands' maxima combine exactly).
    std::vector<double> part(static_cast<std::size_t>(bands), 0.0);
    for_bands(bands, slots, [&](std::int64_t k, std::size_t slot) {
      try {
        const void* data = nullptr;
        element_storage in{};
        band_data(k, slot, data, in);
        const std::int64_t nr = std::min(band, rows - k * band);
        part[static_cast<std::size_t>(k)] =
            rne_block_quantizer::finite_amax(data, in, static_cast<std::size_t>(nr * cols));
        release_band(k);
      } catch (...) {
        errors[static_cast<std::size_t>(k)] = std::current_exception();
      }
    });
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    double amax = 0.0;
    for (double m : part) amax = std::max(amax, m);
    fq.set_tensor_amax(amax);
  }

  std::vector<band_part> parts(static_cast<std::size_t>(bands));
  for_bands(bands, slots, [&](std::int64_t k, std::size_t slot) {
    auto& p = parts[static_cast<std::size_t>(k)];
    try {
      const void* data = nullptr;
      element_storage in{};
      band_data(k, slot, data, in);
      const std::int64_t nr = std::min(band, rows - k * band);
      const auto g = formats::grid_of(c, nr, cols);
      const metrics::bulk_scope bulk(m.bulk_below);  // the strips' lanes sum the bulk apart
      // With activation statistics every strip takes the output lanes (the weighted sums in the
      // same pass), unsampled strips with a bulk bound of 0: no element is in their bulk, so the
      // bulk sums add +0 and stay those of the plain path to the bit, as do the tensor sums.
      std::optional<metrics::output_weights_scope> weights;
      if (m.act_sq_mean) weights.emplace(m.act_sq_mean, cols, g.block_cols);
      std::vector<formats::block_stats> blocks(static_cast<std::size_t>(g.grid_cols));
      for (std::int64_t br = 0; br < g.grid_rows; ++br) {
        const std::int64_t r0 = br * g.block_rows, h = std::min(g.block_rows, nr - r0);
        const std::int64_t at_before = p.sums.max_err_at;
        formats::detail::strip_summary sum;  // outlier blocks by outlier_flushes.hpp
        // The bulk is measured on the strips holding a sampled row (scan_bulk.cpp); the others
        // take the plain error sums, whose tensor sums are the same to the bit.
        const bool sampled = in_bulk_sample(k * band + r0, h, m.sample_rows_step);
        if (weights) {
          const metrics::bulk_scope strip_bulk(sampled ? m.bulk_below : 0.0);
          fq.strip(data, in, cols, r0, h, g.block_cols, blocks, p.sums, &sum);
        } else if (sampled)
          fq.strip(data, in, cols, r0, h, g.block_cols, blocks, static_cast<metrics::quant_bulk_error_sums&>(p.sums), &sum);
        else
          fq.strip(data, in, cols, r0, h, g.block_cols, blocks, static_cast<metrics::quant_error_sums&>(p.sums), &sum);
        p.blocks += static_cast<std::int64_t>(blocks.size());
        p.flushed += sum.flushed;
        p.clipped += sum.clipped;
        p.scale_underflow += sum.scale_underflow;
        p.outlier_blocks += sum.outlier_blocks;
        p.outlier_flushed += sum.outlier_flushed;
        if (sum.worst >= 0) {
          const auto& b = blocks[static_cast<std::size_t>(sum.worst)];
          if (!p.have_outlier || worse_outlier(b, sum.worst_outlier_flushed, p.outlier, p.outlier_worst_flushes)) {
            p.outlier = b;
            p.outlier_worst_flushes = sum.worst_outlier_flushed;
            p.have_outlier = true;
          }
        }
        if (p.sums.max_err_at != at_before)
          p.max_err_block = blocks[static_cast<std::size_t>((p.sums.max_err_at % cols) / g.block_cols)];
      }
      release_band(k);
    } catch (...) {
      p.error = std::current_exception();
    }
  });
  for (auto& p : parts)
    if (p.error) std::rethrow_exception(p.error);

  // Combined in band order: the same additions and first-wins choices for any thread count.
  double max_err = -1.0;
  bool have_outlier = false;
  formats::block_stats worst, max_block;
  std::int64_t worst_r0 = 0, max_r0 = 0, worst_flushes = 0;
  for (std::int64_t k = 0; k < bands; ++k) {
    const auto& p = parts[static_cast<std::size_t>(k)];
    r.sum_sq += p.sums.sum_sq;
    r.sum_sq_err += p.sums.sum_sq_err;
    r.bulk_sum_sq += p.sums.bulk_sum_sq;
    r.bulk_sum_sq_err += p.sums.bulk_sum_sq_err;
    r.output_sum_sq += p.sums.out_sum_sq;
    r.output_sum_sq_err += p.sums.out_sum_sq_err;
    r.nonfinite_inputs += p.sums.nonfinite_inputs;
    r.nonfinite_outputs += p.sums.nonfinite_outputs;
    if (p.sums.max_err > max_err) {
      max_err = p.sums.max_err;
      max_block = p.max_err_block;
      max_r0 = k * band;
    }
    r.blocks += p.blocks;
    r.flushed += p.flushed;
    r.clipped += p.clipped;
    r.scale_underflow_blocks += p.scale_underflow;
    r.outlier_blocks += p.outlier_blocks;
    r.outlier_flushed += p.outlier_flushed;
    if (p.have_outlier && (!have_outlier || worse_outlier(p.outlier, p.outlier_worst_flushes, worst, worst_flushes))) {
      worst = p.outlier;
      worst_flushes = p.outlier_worst_flushes;
      worst_r0 = k * band;
      have_outlier = true;
    }
  }
  r.max_abs = r.nonfinite_outputs > 0 ? k_inf : std::max(0.0, max_err);

  // The worked block: the worst outlier block, else the block holding the largest error.
  if (have_outlier || max_err >= 0) {
    formats::block_stats b = have_outlier ? worst : max_block;
    const std::int64_t r0 = have_outlier ? worst_r0 : max_r0;
    scan_worked_block w;
    w.outlier = have_outlier;
    for (std::int64_t rr = b.row0; rr < b.row0 + b.rows && w.flat.size() < k_worked_elements; ++rr)
      for (std::int64_t cc = b.col0; cc < b.col0 + b.cols && w.flat.size() < k_worked_elements; ++cc)
        w.flat.push_back(rr * cols + cc);
    if (b.argmax >= 0 && std::find(w.flat.begin(), w.flat.end(), b.argmax) == w.flat.end())
      w.flat.back() = b.argmax;
    std::vector<double> rows_buf;
    if (!src.data) {  // the band's rows up to the block's last one
      rows_buf.resize(static_cast<std::size_t>((b.row0 + b.rows) * cols));
      (*src.fetch)(r0, b.row0 + b.rows, rows_buf);
    }
    for (auto& i : w.flat) {
      const double x = src.data ? rne_block_quantizer::element(src.data, src.type,
                                                          static_cast<std::size_t>(i + r0 * cols))
                                : rows_buf[static_cast<std::size_t>(i)];
      w.input.push_back(x);
      w.dequant.push_back(fq.dequant(x, b));
      i += r0 * cols;  // to tensor coordinates
    }
    b.row0 += r0;
    if (b.argmax >= 0) b.argmax += r0 * cols;
    w.stats = b;
    r.worst = std::move(w);
  }
  if (c.kind == scheme_kind::m_tensor) {  // one block, however many bands carried it
    r.blocks = 1;
    r.scale_underflow_blocks = std::min<std::int64_t>(r.scale_underflow_blocks, 1);
  }
  r.sqnr_db = sqnr_of(r.sum_sq, r.sum_sq_err);
  r.rel_rms = rel_rms_of(r.sum_sq, r.sum_sq_err);
  finish_flush_columns(r);
  return r;
}

}  // namespace numprobe::probes::detail
