#pragma once
// rne_block_quantizer::strip<Errors>, the template behind the declaration in
// rne_block_quantizer.hpp: the choice between the full-block row path and the masked path,
// and the masked path's strip summary. Included where an error observer instantiates it
// (metrics/quant_error_sums.cpp), with the observer's lanes type complete.
//
// Private to numprobe: not installed.
#include <cstdint>
#include <span>

#include "numprobe/formats/outlier_flushes.hpp"
#include "src/formats/element_loads.hpp"
#include "src/formats/full_block_row.hpp"
#include "src/formats/masked_strip.hpp"
#include "src/formats/rne_block_quantizer.hpp"
#include "src/formats/strip_segments.hpp"

namespace numprobe::formats::detail {

// One block into a strip summary; `outliers` is its outlier flushes (outlier_flushes.hpp).
inline void add_to_summary(const block_stats& b, std::int32_t outliers, std::int64_t index,
                           const block_stats* worst, strip_summary& s) {
  s.flushed += b.flushed;
  s.clipped += b.clipped;
  s.scale_underflow += b.scale_underflow ? 1 : 0;
  if (outliers <= 0) return;
  ++s.outlier_blocks;
  s.outlier_flushed += outliers;
  if (worst == nullptr || outliers > s.worst_outlier_flushed ||
      (outliers == s.worst_outlier_flushed && b.amax > worst->amax)) {
    s.worst = index;
    s.worst_outlier_flushed = outliers;
  }
}

template <class S, class Errors>
void rne_block_quantizer::strip_typed(const S& src, std::int64_t cols, std::int64_t row0,
                                      std::int64_t nrows, std::int64_t block_cols,
                                      std::span<block_stats> blocks, Errors& errors,
                                      strip_summary* summary) const {
  if (summary) *summary = strip_summary{};
  const scheme_kind kind = m_rule.c.kind;
  const bool scaled = kind != scheme_kind::m_none;
  const double imposed = kind == scheme_kind::m_tensor ? m_tensor_amax : -1.0;
  // The row path divides (or multiplies by an exact reciprocal) in double; a reciprocal
  // division's fp32 multiply takes the masked path (block_coder).
  if (nrows == 1 && imposed < 0 && block_cols % 4 == 0 && cols % block_cols == 0 &&
      m_er.division == scale_division::m_exact) {
    const scale_plan plan = plan_of(m_rule);
    thread_local row_scratch w;
    const bool abs = !m_er.integer && m_er.lowest == -m_er.max;
    const auto fast = [&]<bool Abs>() {
      const auto row = [&]<std::int64_t W>(std::int64_t bcols) {
        return full_block_row<W, Abs>(src, m_er, plan, m_rule, m_unit, m_flush_ratio, cols, row0, bcols, blocks, w,
                                      errors, scaled, summary);
      };
      switch (block_cols) {
        case 16: return row.template operator()<16>(16);
        case 32: return row.template operator()<32>(32);
        default: return row.template operator()<0>(block_cols);
      }
    };
    if (abs ? fast.template operator()<true>() : fast.template operator()<false>()) return;
  }
  typename Errors::lanes lanes;
  const std::int64_t nonfinite_in =
      masked_strip(src, m_er, m_unit, imposed, m_rule, cols, row0, nrows, block_cols, blocks, lanes);
  const strip_segments segs{src, m_er, m_unit, cols, row0, nrows,
                            static_cast<std::int64_t>(blocks.size()), block_cols,
                            [&](std::int64_t j) { return blocks[static_cast<std::size_t>(j)].scale; }};
  lanes.add_to(errors, nonfinite_in, segs);
  if (summary)
    for (std::size_t j = 0; j < blocks.size(); ++j) {
      const block_stats& b = blocks[j];
      const block_coder bc(b, m_unit, m_er);
      // Blocks a sentinel-imposed amax (the `tensor` kind in bands) gives no argmax hold none.
      const std::int32_t of = scaled ? outlier_block_flushes(
                                           kind, m_flush_ratio, b, cols, [&](std::int64_t i) { return src.at(i); },
                                           [&](std::int64_t, double x) { return m_er.round(bc.quotient(splat(x)))[0] == 0.0; })
                                     : 0;
      add_to_summary(b, of, static_cast<std::int64_t>(j),
                     summary->worst < 0 ? nullptr : &blocks[static_cast<std::size_t>(summary->worst)], *summary);
    }
}

template <class Errors>
void rne_block_quantizer::strip(const void* data, element_storage in, std::int64_t cols,
                                std::int64_t row0, std::int64_t nrows, std::int64_t block_cols,
                                std::span<block_stats> blocks, Errors& errors,
                                strip_summary* summary) const {
  with_source(data, in, [&](const auto& src) {
    strip_typed(src, cols, row0, nrows, block_cols, blocks, errors, summary);
  });
}

}  // namespace numprobe::formats::detail
