#include "probes/scan_probe.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <exception>
#include <filesystem>
#include <optional>
#include <regex>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "numprobe/core/error.hpp"
#include "numprobe/formats/outlier_flushes.hpp"
#include "numprobe/io/checkpoint.hpp"
#include "numprobe/io/load_tensor.hpp"
#include "numprobe/io/safetensors.hpp"
#include "src/formats/rne_block_quantizer.hpp"
#include "src/metrics/quant_error_sums.hpp"
#include "src/io/prefetch.hpp"

namespace numprobe::probes {
namespace {

using formats::scheme_kind;
constexpr double k_inf = std::numeric_limits<double>::infinity();

int max_threads() {
#ifdef _OPENMP
  return std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}
constexpr std::size_t k_worked_elements = 32;

double sqnr_of(double sx, double se) { return se > 0 ? 10.0 * std::log10(sx / se) : k_inf; }
double rel_rms_of(double sx, double se) {
  return sx > 0 ? std::sqrt(se / sx) : (se > 0 ? k_inf : 0.0);
}

// Outlier blocks and flushes: the shared definition (numprobe/formats/outlier_flushes.hpp), the
// same as the quant probe's; the fused path computes it in src/formats/full_block_row.cpp.

bool float_dtype(io::dtype d) {
  return d == io::dtype::m_f32 || d == io::dtype::m_f16 || d == io::dtype::m_bf16 ||
         d == io::dtype::m_f64;
}

void finish_group(scan_group& g) {
  g.sqnr_db = sqnr_of(g.sum_sq, g.sum_sq_err);
  g.rel_rms = rel_rms_of(g.sum_sq, g.sum_sq_err);
}

void add_to_group(scan_group& g, const scan_tensor& t, const scan_scheme_result& r) {
  ++g.tensors;
  g.elements += r.elements;
  g.sum_sq += r.sum_sq;
  g.sum_sq_err += r.sum_sq_err;
  g.flushed += r.flushed;
  g.clipped += r.clipped;
  g.outlier_blocks += r.outlier_blocks;
  g.bytes += r.bytes;
  if (g.worst_tensor.empty() || r.sqnr_db < g.worst_sqnr_db) {
    g.worst_tensor = t.name;
    g.worst_sqnr_db = r.sqnr_db;
  }
}

}  // namespace

// Layer types, by the names Hugging Face (Llama, Mistral, Qwen, DeepSeek), GPT-2/NeoX and
// llama.cpp (GGUF-converted) checkpoints use. Norms are checked first: "q_norm" is a norm.
std::string layer_type_of(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto has = [&](std::string_view s) { return n.find(s) != std::string::npos; };
  if (has("norm") || has(".ln_") || has("ln_f")) return "norms";
  if (has("lm_head") || n == "output.weight") return "lm_head";
  if (has("embed") || has("wte") || has("wpe") || has("tok_embeddings")) return "embeddings";
  if (has("qkv")) return "qkv_proj";
  if (has("q_proj") || has(".wq.") || has("attn_q.") || has(".query.")) return "q_proj";
  if (has("k_proj") || has(".wk.") || has("attn_k.") || has(".key.")) return "k_proj";
  if (has("v_proj") || has(".wv.") || has("attn_v.") || has(".value.")) return "v_proj";
  if (has("o_proj") || has(".wo.") || has("out_proj") || has("attn_output") || has("attn.c_proj"))
    return "o_proj";
  if (has("gate_up")) return "gate_up_proj";
  if (has("gate_proj") || has(".w1.") || has("ffn_gate")) return "gate_proj";
  if (has("up_proj") || has(".w3.") || has("ffn_up") || has("c_fc")) return "up_proj";
  if (has("down_proj") || has(".w2.") || has("ffn_down") || has("mlp.c_proj")) return "down_proj";
  if (has("router") || has(".gate.")) return "router";
  return "other";
}

// The first "<layers|layer|h|blocks|block|blk>.<N>." in the name.
int layer_index_of(const std::string& name) {
  static const std::regex re(R"((?:^|\.)(?:layers|layer|h|blocks|block|blk)\.(\d+)(?:\.|$))");
  std::smatch m;
  if (!std::regex_search(name, m, re)) return -1;
  return static_cast<int>(std::min<long long>(std::stoll(m[1].str()), 1 << 30));
}

namespace {

using fetch_fn = std::function<void(std::int64_t, std::int64_t, std::span<double>)>;
using formats::detail::element_storage;
using formats::detail::rne_block_quantizer;

// Where a tensor's rows come from: elements in memory (read in place), or a fetch callback
// that decodes rows into a buffer.
struct row_source {
  const std::byte* data = nullptr;
  element_storage type = element_storage::m_f64;
  const fetch_fn* fetch = nullptr;
  const std::function<void(std::size_t, std::size_t)>* release = nullptr;  // in-place data only
};

// What one band contributes; bands are combined in band order (scan_fused).
struct band_part {
  metrics::quant_error_sums sums;
  std::int64_t blocks = 0, flushed = 0, clipped = 0, scale_underflow = 0;
  std::int64_t outlier_blocks = 0, outlier_flushed = 0;
  bool have_outlier = false;
  formats::block_stats outlier;  // the band's first worst outlier block (band coordinates)
  std::int64_t outlier_worst_flushes = 0;  // its outlier flushes
  formats::block_stats max_err_block;  // the block holding sums.max_err_at
  std::exception_ptr error;
};

// Runs fn(k, slot) for every k in [0, n) on `slots` threads (this one and up to slots - 1
// started here, `slot` naming which), each taking the next k from a shared counter, and
// returns when all are done. A thread out of work blocks in the join instead of spinning at
// an OpenMP barrier, which on a shared two-core machine takes time from the thread still
// working. fn must not throw.
template <class F>
void for_bands(std::int64_t n, int slots, const F& fn) {
  std::atomic<std::int64_t> next{0};
  const auto work = [&](std::size_t slot) {
    for (std::int64_t k = next.fetch_add(1); k < n; k = next.fetch_add(1)) fn(k, slot);
  };
  std::vector<std::jthread> pool;
  for (std::int64_t t = 1; t < std::min<std::int64_t>(slots, n); ++t)
    pool.emplace_back(work, static_cast<std::size_t>(t));
  work(0);
}

// True when block b (bf outlier flushes) is worse than w (wf): more outlier flushes, then the
// larger amax (the quant probe's rule).
bool worse_outlier(const formats::block_stats& b, std::int64_t bf, const formats::block_stats& w,
                   std::int64_t wf) {
  return bf > wf || (bf == wf && b.amax > w.amax);
}

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
                              std::int64_t band) {
  rne_block_quantizer fq(c);
  const std::int64_t bands = (rows + band - 1) / band;
  const int slots = max_threads();
  std::vector<std::vector<double>> bufs(src.data ? 0 : static_cast<std::size_t>(slots));
  std::vector<std::exception_ptr> errors(bands);
  const std::size_t elem_bytes = src.type == element_storage::m_f64   ? 8
                                 : src.type == element_storage::m_f32 ? 4
                                                                 : 2;
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
      std::vector<formats::block_stats> blocks(static_cast<std::size_t>(g.grid_cols));
      for (std::int64_t br = 0; br < g.grid_rows; ++br) {
        const std::int64_t r0 = br * g.block_rows, h = std::min(g.block_rows, nr - r0);
        const std::int64_t at_before = p.sums.max_err_at;
        formats::detail::strip_summary sum;  // outlier blocks by outlier_flushes.hpp
        fq.strip(data, in, cols, r0, h, g.block_cols, blocks, p.sums, &sum);
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
  return r;
}

scan_scheme_result scan_scheme(const std::string& scheme, std::int64_t rows, std::int64_t cols,
                               const row_source& src, std::int64_t band_elements) {
  const auto& info = formats::find_scheme(scheme, "--format");
  const auto c = info.defaults;
  formats::validate(c, rows, cols);
  const auto grid = formats::grid_of(c, rows, cols);
  scan_scheme_result r;
  r.scheme = std::string(info.name);
  r.elements = rows * cols;
  r.bits_per_element = formats::bits_per_element(c, rows, cols);
  r.bytes = r.bits_per_element * static_cast<double>(r.elements) / 8.0;

  // Band height: whole scaling blocks. A scale shared by the whole tensor (NVFP4's s_t, the
  // `tensor` scheme) is imposed on each band by a sentinel row holding the tensor's amax:
  // quantize() then derives exactly the whole tensor's scale, and the sentinel row's own
  // blocks are dropped from the statistics (it adds nothing to a single-block `tensor` band:
  // zeros are never flushed and the amax maps to the max exactly).
  const bool tensor_scaled = c.kind == scheme_kind::m_nvfp4 || c.kind == scheme_kind::m_tensor;
  const std::int64_t unit = tensor_scaled ? 1 : grid.block_rows;
  // Bands are quantized `slots` at a time on as many threads (quantize() inside runs on one
  // thread then: nested regions are inactive), and their statistics are then added up in band
  // order on one thread, so every sum runs over the elements in the same order as before and
  // nothing depends on the thread count. Band height never
  // changes the statistics (the banded result equals quantize() on the whole tensor), but it
  // does choose the worked block of a `tensor` scan (one block per band), so the band height
  // stays what band_elements gives, whatever the thread count; memory is `slots` bands.
  const int slots = max_threads();
  std::int64_t band = rows;
  if (unit < rows) band = std::max(unit, (band_elements / std::max<std::int64_t>(cols, 1)) / unit * unit);
  band = std::min(band, rows);
  const bool sentinel = tensor_scaled && band < rows;
  if (rne_block_quantizer::covers(c)) return scan_fused(c, std::move(r), rows, cols, src, band);
  // The quantize()-based path (schemes the fused quantizer does not cover: zero points,
  // directed or stochastic rounding, non-saturating overflow), from decoded bands.
  fetch_fn from_memory;
  if (src.data)
    from_memory = [&](std::int64_t r0, std::int64_t, std::span<double> out) {
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = rne_block_quantizer::element(src.data, src.type,
                                         static_cast<std::size_t>(r0 * cols) + i);
    };
  const fetch_fn& fetch = src.data ? from_memory : *src.fetch;

  const std::int64_t bands = (rows + band - 1) / band;
  std::vector<std::vector<double>> bufs(static_cast<std::size_t>(slots));
  std::vector<formats::quant_result> qs(static_cast<std::size_t>(slots));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(slots));
  // Exceptions may not leave a parallel region: each slot keeps its own, and the lowest band's
  // is rethrown, the one a sequential loop would have met first.
  const auto rethrow_first = [&] {
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  };

  double amax = 0.0;
  if (sentinel) {  // max is exact and order-free, so the parts combine to the same amax
    std::vector<double> part(static_cast<std::size_t>(slots), 0.0);
#pragma omp parallel for schedule(static, 1) num_threads(slots)
    for (std::int64_t k = 0; k < bands; ++k) {
      const auto t = static_cast<std::size_t>(k % slots);
      if (errors[t]) continue;
      try {
        const std::int64_t r0 = k * band, nr = std::min(band, rows - r0);
        auto& buf = bufs[t];
        buf.resize(static_cast<std::size_t>(nr * cols));
        fetch(r0, nr, buf);
        double m = part[t];
        for (double v : buf) {  // a select, not a branch: m stays in a register
          const double a = std::fabs(v);
          m = std::max(m, std::isfinite(a) ? a : 0.0);
        }
        part[t] = m;
      } catch (...) {
        errors[t] = std::current_exception();
      }
    }
    rethrow_first();
    for (double m : part) amax = std::max(amax, m);
  }

  double max_err = -1.0;
  std::int64_t max_err_at = -1;
  bool have_outlier = false;
  std::int32_t worst_outlier_flushes = 0;
  for (std::int64_t k0 = 0; k0 < bands; k0 += slots) {
    const std::int64_t batch = std::min<std::int64_t>(slots, bands - k0);
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(batch))
    for (std::int64_t j = 0; j < batch; ++j) {
      const auto t = static_cast<std::size_t>(j);
      try {
        const std::int64_t r0 = (k0 + j) * band, nr = std::min(band, rows - r0);
        const std::size_t n = static_cast<std::size_t>(nr * cols);
        auto& buf = bufs[t];
        buf.assign(n + (sentinel ? static_cast<std::size_t>(cols) : 0), 0.0);
        fetch(r0, nr, std::span<double>(buf.data(), n));
        if (sentinel) buf[n] = amax;
        qs[t] = formats::quantize(c, buf, nr + (sentinel ? 1 : 0), cols);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    }
    rethrow_first();
    for (std::int64_t j = 0; j < batch; ++j) {
      const std::int64_t r0 = (k0 + j) * band, nr = std::min(band, rows - r0);
      const std::size_t n = static_cast<std::size_t>(nr * cols);
      const auto& buf = bufs[static_cast<std::size_t>(j)];
      const auto& q = qs[static_cast<std::size_t>(j)];

      {
        // Register accumulators: the same additions in the same order as accumulating into r
        // directly (so the same bits), without a store and reload of r per element.
        double sum_sq = r.sum_sq, sum_sq_err = r.sum_sq_err, max_abs = r.max_abs;
        std::int64_t nonfinite_in = 0, nonfinite_out = 0;
        const double* dq = q.dequant.data();
        for (std::size_t i = 0; i < n; ++i) {
          const double x = buf[i];
          if (!std::isfinite(x)) {
            ++nonfinite_in;
            continue;
          }
          const double d = dq[i];
          if (!std::isfinite(d)) {
            ++nonfinite_out;
            sum_sq_err = k_inf;
            max_abs = k_inf;
            continue;
          }
          const double e = std::fabs(d - x);
          sum_sq += x * x;
          sum_sq_err += e * e;
          if (e > max_err) {
            max_err = e;
            max_err_at = static_cast<std::int64_t>(i) + r0 * cols;
          }
        }
        r.sum_sq = sum_sq;
        r.sum_sq_err = sum_sq_err;
        r.max_abs = max_abs;
        r.nonfinite_inputs += nonfinite_in;
        r.nonfinite_outputs += nonfinite_out;
      }
      r.max_abs = std::max(r.max_abs, max_err);

      const auto take_worked = [&](const formats::block_stats& b, bool outlier) {
        scan_worked_block w;
        w.stats = b;
        w.outlier = outlier;
        for (std::int64_t rr = b.row0; rr < b.row0 + b.rows && w.flat.size() < k_worked_elements; ++rr)
          for (std::int64_t cc = b.col0; cc < b.col0 + b.cols && w.flat.size() < k_worked_elements; ++cc)
            w.flat.push_back(rr * cols + cc);
        if (b.argmax >= 0 && std::find(w.flat.begin(), w.flat.end(), b.argmax) == w.flat.end())
          w.flat.back() = b.argmax;
        for (auto i : w.flat) {
          w.input.push_back(buf[static_cast<std::size_t>(i)]);
          w.dequant.push_back(q.dequant[static_cast<std::size_t>(i)]);
        }
        // To tensor coordinates.
        for (auto& i : w.flat) i += r0 * cols;
        w.stats.row0 += r0;
        if (w.stats.argmax >= 0) w.stats.argmax += r0 * cols;
        r.worst = std::move(w);
      };

      const auto& g = q.grid;
      for (std::size_t bi = 0; bi < q.blocks.size(); ++bi) {
        const auto& b = q.blocks[bi];
        if (b.row0 >= nr) continue;  // the sentinel row's blocks
        ++r.blocks;
        r.flushed += b.flushed;
        r.clipped += b.clipped;
        r.scale_underflow_blocks += b.scale_underflow ? 1 : 0;
        const std::int32_t of = b.argmax < nr * cols
                                    ? formats::outlier_block_flushes(
                                          c, b, cols, [&](std::int64_t i) { return buf[static_cast<std::size_t>(i)]; },
                                          [&](std::int64_t i, double) { return q.dequant[static_cast<std::size_t>(i)] == 0.0; })
                                    : 0;
        if (of > 0) {
          ++r.outlier_blocks;
          r.outlier_flushed += of;
          // The worst outlier block: most outlier flushes, then the larger amax (as quant).
          if (!have_outlier || of > worst_outlier_flushes || (of == worst_outlier_flushes && b.amax > r.worst.stats.amax)) {
            take_worked(b, true);
            worst_outlier_flushes = of;
            have_outlier = true;
          }
        }
      }
      // Without an outlier block, the worked block is the one holding the largest error.
      if (!have_outlier && max_err_at >= r0 * cols && max_err_at < (r0 + nr) * cols) {
        const std::int64_t local = max_err_at - r0 * cols;
        const std::int64_t br = (local / cols) / g.block_rows, bc = (local % cols) / g.block_cols;
        const auto bi = static_cast<std::size_t>(br * g.grid_cols + bc);
        if (bi < q.blocks.size() && q.blocks[bi].row0 < nr) take_worked(q.blocks[bi], false);
      }
    }
  }
  if (c.kind == scheme_kind::m_tensor) {  // one block, however many bands carried it
    r.blocks = 1;
    r.scale_underflow_blocks = std::min<std::int64_t>(r.scale_underflow_blocks, 1);
  }
  r.sqnr_db = sqnr_of(r.sum_sq, r.sum_sq_err);
  r.rel_rms = rel_rms_of(r.sum_sq, r.sum_sq_err);
  return r;
}

// The dtypes the fused path reads in place.
bool in_place(io::dtype d, element_storage& in) {
  switch (d) {
    case io::dtype::m_f64: in = element_storage::m_f64; return true;
    case io::dtype::m_f32: in = element_storage::m_f32; return true;
    case io::dtype::m_bf16: in = element_storage::m_bf16; return true;
    case io::dtype::m_f16: in = element_storage::m_f16; return true;
    default: return false;
  }
}

}  // namespace

scan_scheme_result scan_tensor_scheme(const std::string& scheme, std::int64_t rows,
                                      std::int64_t cols, const fetch_fn& fetch,
                                      std::int64_t band_elements) {
  row_source src;
  src.fetch = &fetch;
  return scan_scheme(scheme, rows, cols, src, band_elements);
}

scan_scheme_result scan_tensor_scheme(const std::string& scheme, std::int64_t rows,
                                      std::int64_t cols, const std::byte* data, io::dtype type,
                                      std::int64_t band_elements,
                                      const std::function<void(std::size_t, std::size_t)>& release) {
  row_source src;
  src.data = data;
  src.release = &release;
  if (!in_place(type, src.type))
    throw_input_error("dtype", "cannot read " + std::string(io::name(type)) +
                                   " in place (f64, f32, bf16, f16)");
  return scan_scheme(scheme, rows, cols, src, band_elements);
}

scan_report run_scan(const scan_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  scan_report rep;
  rep.options = o;
  rep.options.progress = nullptr;
  if (o.schemes.empty()) throw_input_error("--format", "no format/scheme given");
  for (const auto& s : o.schemes) (void)formats::find_scheme(s, "--format/--vs");
  std::regex filter;
  try {
    filter = std::regex(o.filter.empty() ? std::string(".*") : o.filter, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw_input_error("--filter", "bad regular expression '" + o.filter + "': " + e.what());
  }

  // A single .npy file scans as a one-tensor checkpoint named after the file, streamed from
  // its memory map the same way.
  const bool npy = o.checkpoint.size() > 4 && o.checkpoint.compare(o.checkpoint.size() - 4, 4, ".npy") == 0;
  std::optional<io::checkpoint> ck;
  std::optional<io::tensor_view> npy_view;
  std::vector<std::pair<std::string, std::pair<io::dtype, std::vector<std::uint64_t>>>> entries;
  if (npy) {
    npy_view = io::load_tensor(o.checkpoint);
    npy_view->name = std::filesystem::path(o.checkpoint).stem().string();
    entries.push_back({npy_view->name, {npy_view->dtype, npy_view->shape}});
  } else {
    ck = io::checkpoint::open(o.checkpoint);
    for (const auto& e : ck->tensors()) entries.push_back({e.name, {e.dtype, e.shape}});
  }
  // An empty selection is an input error (exit 2), not a report of nothing with sqnr_db inf.
  if (entries.empty()) throw_input_error(o.checkpoint, "holds no tensors: nothing to scan");
  std::map<std::string, bool> selected;
  std::size_t total = 0;
  for (const auto& [name, ds] : entries) {
    const auto& [dt, shape] = ds;
    bool take = std::regex_search(name, filter);
    if (!take) continue;
    std::uint64_t count = 1;
    for (auto d : shape) count *= d;
    if (!float_dtype(dt)) {
      rep.skipped.push_back(name + " (dtype " + std::string(io::name(dt)) + ")");
      take = false;
    } else if (count == 0) {
      rep.skipped.push_back(name + " (empty)");
      take = false;
    } else if (shape.size() < 2 && !o.all) {
      rep.skipped.push_back(name + " (not a matrix; --all includes it)");
      take = false;
    }
    selected[name] = take;
    total += take ? 1 : 0;
  }

  if (total == 0) {
    if (!o.filter.empty() && selected.empty())
      throw_input_error("--filter", "'" + o.filter + "' matches none of the " + std::to_string(entries.size()) +
                                        " tensors of " + o.checkpoint);
    std::string why;
    for (std::size_t i = 0; i < rep.skipped.size() && i < 3; ++i) why += (i ? "; " : "") + rep.skipped[i];
    throw_input_error(o.checkpoint, "no tensor to scan: all " + std::to_string(rep.skipped.size()) +
                                        " selected tensors were skipped (" + why +
                                        (rep.skipped.size() > 3 ? "; ..." : "") + ")");
  }

  // The read-ahead plan: the selected tensors' byte ranges in the order the pass visits them
  // (shard by shard, by position in the shard), and where each starts in the plan.
  std::vector<io::file_range> plan;
  std::map<std::string, std::uint64_t> plan_start;
  if (o.prefetch_window > 0) {
    std::uint64_t at = 0;
    const auto add = [&](const io::tensor_view& v, const std::filesystem::path& file) {
      const auto offset = static_cast<std::uint64_t>(v.bytes.data() - v.owner->bytes().data());
      plan.push_back({file, offset, v.bytes.size()});
      plan_start.emplace(v.name, at);
      at += v.bytes.size();
    };
    if (npy) {
      if (npy_view->owner && selected[npy_view->name]) add(*npy_view, o.checkpoint);
    } else {
      for (std::size_t s = 0; s < ck->shards().size(); ++s) {
        const auto f = io::safetensors_file::open(ck->shards()[s]);
        for (const auto& e : ck->tensors())
          if (e.shard == s && selected[e.name])
            if (const auto* v = f.find(e.name); v && v->owner) add(*v, ck->shards()[s]);
      }
    }
  }
  io::prefetcher ahead(std::move(plan), {.window = o.prefetch_window});

  std::size_t done = 0;
  const auto scan_view = [&](const io::tensor_view& v) {
    if (!selected[v.name]) return;
    if (const auto it = plan_start.find(v.name); it != plan_start.end()) ahead.consumed(it->second);
    scan_tensor t;
    t.name = v.name;
    t.dtype = std::string(io::name(v.dtype));
    t.shape = v.shape;
    t.cols = v.shape.empty() ? 1 : static_cast<std::int64_t>(v.shape.back());
    t.rows = static_cast<std::int64_t>(v.element_count()) / t.cols;
    t.layer_type = layer_type_of(v.name);
    t.layer = layer_index_of(v.name);
    const auto fetch = [&](std::int64_t r0, std::int64_t nr, std::span<double> out) {
      (void)nr;
      v.decode(static_cast<std::uint64_t>(r0 * t.cols), out);
    };
    // Without the prefetcher, a hint instead: the next tensor of a safetensors shard starts
    // where this one ends; ask for about as many bytes as this one has.
    if (v.owner && o.prefetch_window == 0) {
      const auto base = v.owner->bytes().data();
      const auto end = static_cast<std::size_t>(v.bytes.data() + v.bytes.size() - base);
      v.owner->will_need(end, v.bytes.size());
    }
    // A large tensor's bands go back as they are done (scan_options::release_above).
    std::function<void(std::size_t, std::size_t)> release;
    if (v.owner && v.bytes.size() > o.release_above) {
      const auto at = static_cast<std::size_t>(v.bytes.data() - v.owner->bytes().data());
      release = [&v, at](std::size_t first, std::size_t bytes) { v.owner->release_pages(at + first, bytes); };
    }
    element_storage in{};
    const bool direct = in_place(v.dtype, in);
    for (const auto& s : o.schemes)
      t.results.push_back(direct ? scan_tensor_scheme(s, t.rows, t.cols, v.bytes.data(), v.dtype,
                                                      o.band_elements, release)
                                 : scan_tensor_scheme(s, t.rows, t.cols, fetch, o.band_elements));
    rep.source_bytes += static_cast<double>(v.bytes.size());
    rep.bytes_read += static_cast<double>(v.bytes.size());
    rep.tensors.push_back(std::move(t));
    ++done;
    if (o.progress) o.progress(done, total, v.name);
  };
  if (npy) scan_view(*npy_view);
  else ck->for_each(scan_view);

  std::stable_sort(rep.tensors.begin(), rep.tensors.end(),
                   [](const scan_tensor& a, const scan_tensor& b) {
                     return a.results[0].sqnr_db < b.results[0].sqnr_db;
                   });

  for (std::size_t s = 0; s < o.schemes.size(); ++s) {
    std::map<std::string, scan_group> types;
    std::map<int, scan_group> depths;
    scan_group tot;
    tot.key = rep.tensors.empty() ? o.schemes[s] : rep.tensors[0].results[s].scheme;
    for (const auto& t : rep.tensors) {
      const auto& r = t.results[s];
      auto& gt = types[t.layer_type];
      gt.key = t.layer_type;
      add_to_group(gt, t, r);
      auto& gd = depths[t.layer];
      gd.key = t.layer < 0 ? "none" : std::to_string(t.layer);
      add_to_group(gd, t, r);
      add_to_group(tot, t, r);
    }
    std::vector<scan_group> vt, vd;
    for (auto& [k, g] : types) {
      finish_group(g);
      vt.push_back(g);
    }
    std::stable_sort(vt.begin(), vt.end(),
                     [](const scan_group& a, const scan_group& b) { return a.sqnr_db < b.sqnr_db; });
    for (auto& [k, g] : depths) {
      finish_group(g);
      vd.push_back(g);
    }
    finish_group(tot);
    rep.by_type.push_back(std::move(vt));
    rep.by_depth.push_back(std::move(vd));
    rep.totals.push_back(tot);
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace numprobe::probes
