// The scan (issue 6): every matrix of a checkpoint through a scheme, streamed from the memory
// map. This file holds the quantize()-based path and the pass over the checkpoint; the fused
// path, the band machinery, the layer taxonomy and the report assembly have their own files
// (scan_fused.cpp, scan_bands.hpp, scan_taxonomy.cpp, scan_groups.cpp).
#include "probes/scan/scan_probe.hpp"

#include "numprobe/formats/conventions.hpp"

#include <chrono>
#include <fmt/format.h>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "numprobe/base/error.hpp"
#include "probes/names/name_filter.hpp"
#include "numprobe/formats/outlier_flushes.hpp"
#include "numprobe/io/checkpoint.hpp"
#include "numprobe/io/load_tensor.hpp"
#include "numprobe/io/safetensors.hpp"
#include "probes/scan/scan_bands.hpp"
#include "src/io/prefetch.hpp"

namespace numprobe::probes {
namespace {

using namespace detail;

// Outlier blocks and flushes: the shared definition (numprobe/formats/outlier_flushes.hpp), the
// same as the quant probe's; the fused path computes it in src/formats/full_block_row.cpp.
bool float_dtype(io::dtype d) {
  return d == io::dtype::m_f32 || d == io::dtype::m_f16 || d == io::dtype::m_bf16 ||
         d == io::dtype::m_f64;
}

scan_scheme_result scan_scheme(const std::string& scheme, std::int64_t rows, std::int64_t cols,
                               const row_source& src, std::int64_t band_elements, const scan_magnitudes& m,
                               const std::function<void(formats::scheme_config&)>* adjust = nullptr) {
  const auto& info = formats::find_scheme(scheme, "--format");
  auto c = info.defaults;
  if (adjust && *adjust) (*adjust)(c);
  formats::validate(c, rows, cols);
  const auto grid = formats::grid_of(c, rows, cols);
  scan_scheme_result r;
  r.scheme = std::string(info.name);
  r.conventions = formats::conventions_text(c);
  r.elements = rows * cols;
  r.bits_per_element = formats::bits_per_element(c, rows, cols);
  r.bytes = r.bits_per_element * static_cast<double>(r.elements) / 8.0;
  r.output_weighted = m.act_sq_mean != nullptr;

  // Band height: whole scaling blocks. A scale shared by the whole tensor (NVFP4's s_t, the
  // `tensor` scheme) is imposed on each band by a sentinel row holding the tensor's amax:
  // quantize() then derives exactly the whole tensor's scale, and the sentinel row's own
  // blocks are dropped from the statistics (it adds nothing to a single-block `tensor` band:
  // zeros are never flushed and the amax maps to the max exactly).
  const bool tensor_scaled = c.kind == scheme_kind::m_nvfp4 || c.kind == scheme_kind::m_tensor;
  const std::int64_t unit = tensor_scaled ? 1 : grid.block_rows;
  // Bands are quantized `slots` at a time on the band pool (for_bands; quantize() inside runs
  // on its band's thread alone), and their statistics are then added up in band
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
  if (rne_block_quantizer::covers(c)) return scan_fused(c, std::move(r), rows, cols, src, band, m);
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
  // Exceptions may not leave a band worker: each band of a batch keeps its own, and the lowest
  // band's is rethrown, the one a sequential loop would have met first.
  const auto rethrow_first = [&] {
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  };

  const double bulk_below = m.bulk_below;
  double amax = 0.0;
  if (sentinel) {  // max is exact and order-free, so the parts combine to the same amax
    std::vector<double> part(static_cast<std::size_t>(slots), 0.0);
    std::vector<std::exception_ptr> band_errors(static_cast<std::size_t>(bands));
    for_bands(bands, slots, [&](std::int64_t k, std::size_t t) {
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
        band_errors[static_cast<std::size_t>(k)] = std::current_exception();
      }
    });
    for (auto& e : band_errors)  // the lowest band's, as a sequential loop would meet it
      if (e) std::rethrow_exception(e);
    for (double m : part) amax = std::max(amax, m);
  }

  double max_err = -1.0;
  std::int64_t max_err_at = -1;
  bool have_outlier = false;
  std::int32_t worst_outlier_flushes = 0;
  for (std::int64_t k0 = 0; k0 < bands; k0 += slots) {
    const std::int64_t batch = std::min<std::int64_t>(slots, bands - k0);
    for_bands(batch, static_cast<int>(batch), [&](std::int64_t j, std::size_t) {
      const auto t = static_cast<std::size_t>(j);
      const one_openmp_thread alone;  // quantize()'s block loop stays on this band's thread
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
    });
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
        double bulk_sq = r.bulk_sum_sq, bulk_sq_err = r.bulk_sum_sq_err;
        // The output error's weighted sums (--act-stats): band rows start at column 0.
        double out_sq = r.output_sum_sq, out_sq_err = r.output_sum_sq_err;
        const double* act = m.act_sq_mean;
        // The rows whose strip (block row) the bulk is measured on, as the fused path's.
        std::vector<char> sampled(static_cast<std::size_t>(nr));
        for (std::int64_t rr = 0; rr < nr; rr += q.grid.block_rows) {
          const std::int64_t h = std::min(q.grid.block_rows, nr - rr);
          std::fill_n(sampled.begin() + rr, h, in_bulk_sample(r0 + rr, h, m.sample_rows_step) ? 1 : 0);
        }
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
          if (act) {
            const double w = act[i % static_cast<std::size_t>(cols)];
            out_sq += x * x * w;
            out_sq_err += e * e * w;
          }
          if (std::fabs(x) < bulk_below && sampled[i / static_cast<std::size_t>(cols)]) {
            bulk_sq += x * x;
            bulk_sq_err += e * e;
          }
          if (e > max_err) {
            max_err = e;
            max_err_at = static_cast<std::int64_t>(i) + r0 * cols;
          }
        }
        r.sum_sq = sum_sq;
        r.sum_sq_err = sum_sq_err;
        r.bulk_sum_sq = bulk_sq;
        r.bulk_sum_sq_err = bulk_sq_err;
        r.output_sum_sq = out_sq;
        r.output_sum_sq_err = out_sq_err;
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
  finish_flush_columns(r);
  return r;
}

// A tensor's schemes after one magnitude pass (scan_bulk.cpp) over it.
scan_scheme_result scan_scheme(const std::string& scheme, std::int64_t rows, std::int64_t cols,
                               const row_source& src, std::int64_t band_elements) {
  return scan_scheme(scheme, rows, cols, src, band_elements, magnitude_pass(rows, cols, src));
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
  const std::regex filter = name_filter(o.filter);

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

  // --shard i/N: this shard's share of the selected tensors (scan_shard_of); the rest of the
  // report stays the whole selection's, so that merged shards give the unsharded report.
  std::map<std::string, bool> mine = selected;
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    throw_input_error("--shard", fmt::format("{}/{} is not i/N with 0 <= i < N", o.shard_index, o.shard_count));
  if (o.shard_count > 1) {
    std::vector<std::string> names;
    std::vector<std::uint64_t> bytes;
    for (const auto& [name, ds] : entries) {
      if (!selected[name]) continue;
      std::uint64_t count = 1;
      for (auto d : ds.second) count *= d;
      names.push_back(name);
      bytes.push_back((count * static_cast<std::uint64_t>(io::bits(ds.first)) + 7) / 8);
    }
    const auto shard = scan_shard_of(names, bytes, o.shard_count);
    total = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      mine[names[i]] = shard[i] == o.shard_index;
      total += mine[names[i]] ? 1 : 0;
    }
  }

  // --act-stats: each selected tensor's statistics found and validated before any is scanned.
  std::optional<scan_act_stats> act;
  std::map<std::string, std::string> act_key;  // weight -> its statistics' key
  if (!o.act_stats.empty()) {
    act.emplace(o.act_stats);
    std::set<std::string> used;
    for (const auto& [name, ds] : entries) {
      if (!selected[name]) continue;
      const std::string key = act->key_of(name);
      if (key.empty()) {
        rep.without_act_stats.push_back(name);
        continue;
      }
      const auto& shape = ds.second;
      (void)act->load(key, name, shape.empty() ? 1 : static_cast<std::int64_t>(shape.back()));
      act_key.emplace(name, key);
      used.insert(key);
    }
    if (act_key.empty())
      throw_input_error("--act-stats " + o.act_stats,
                        "none of its " + std::to_string(act->tensor_count()) + " tensors is named after one of the " +
                            std::to_string(total) + " scanned tensors (W, or W with .weight replaced by .input_sq_mean)");
    rep.act_stats_unused = act->tensor_count() - used.size();
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
      if (npy_view->owner && mine[npy_view->name]) add(*npy_view, o.checkpoint);
    } else {
      for (std::size_t s = 0; s < ck->shards().size(); ++s) {
        const auto f = io::safetensors_file::open(ck->shards()[s]);
        for (const auto& e : ck->tensors())
          if (e.shard == s && mine[e.name])
            if (const auto* v = f.find(e.name); v && v->owner) add(*v, ck->shards()[s]);
      }
    }
  }
  io::prefetcher ahead(std::move(plan), {.window = o.prefetch_window});

  std::size_t done = 0;
  std::int64_t position = 0;  // among the selected tensors, in pass order (scan_tensor::position)
  const auto scan_view = [&](const io::tensor_view& v) {
    if (!selected[v.name]) return;
    const std::int64_t at = position++;
    if (!mine[v.name]) return;
    if (const auto it = plan_start.find(v.name); it != plan_start.end()) ahead.consumed(it->second);
    scan_tensor t;
    t.name = v.name;
    t.dtype = std::string(io::name(v.dtype));
    t.shape = v.shape;
    t.cols = v.shape.empty() ? 1 : static_cast<std::int64_t>(v.shape.back());
    t.rows = static_cast<std::int64_t>(v.element_count()) / t.cols;
    t.layer_type = layer_type_of(v.name);
    t.layer = layer_index_of(v.name);
    t.position = at;
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
    const fetch_fn fetch_rows = fetch;
    row_source src;
    if (in_place(v.dtype, src.type)) {
      src.data = v.bytes.data();
      src.release = &release;
    } else {
      src.fetch = &fetch_rows;
    }
    // One bulk bound for all the tensor's schemes (scan_bulk.cpp), and its activation statistics.
    auto m = magnitude_pass(t.rows, t.cols, src);
    t.bulk_below = m.bulk_below;
    std::vector<double> act_sq;
    if (const auto it = act_key.find(v.name); it != act_key.end()) {
      act_sq = act->load(it->second, v.name, t.cols);
      m.act_sq_mean = act_sq.data();
      t.act_stats = it->second;
    }
    for (const auto& s : o.schemes) t.results.push_back(scan_scheme(s, t.rows, t.cols, src, o.band_elements, m, &o.adjust_scheme));
    rep.source_bytes += static_cast<double>(v.bytes.size());
    rep.bytes_read += static_cast<double>(v.bytes.size());
    rep.tensors.push_back(std::move(t));
    ++done;
    if (o.progress) o.progress(done, total, v.name);
  };
  if (npy) scan_view(*npy_view);
  else ck->for_each(scan_view);

  rank_and_group(rep);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace numprobe::probes
