#include "probes/quant/quant_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/outlier_flushes.hpp"
#include "numprobe/io/load_tensor.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::probes {
namespace {

using formats::scheme_kind;

std::string case_id(const quant_probe_options& o, std::int64_t rows, std::int64_t cols) {
  const auto& c = o.config;
  std::string id = "quant(";
  if (!o.input.empty()) id += "input=" + o.input + ",";
  id += fmt::format("M={},N={},fmt={},scheme={}", rows, cols, formats::name(c.element),
                    o.scheme_name);
  // Only settings that differ from the scheme's defaults, so the id stays short and canonical.
  const auto& d = formats::find_scheme(o.scheme_name).defaults;
  if (c.scale_format != d.scale_format) id += fmt::format(",scale={}", formats::name(c.scale_format));
  if (c.axis != d.axis) id += fmt::format(",axis={}", c.axis);
  if (c.group != d.group) id += fmt::format(",G={}", c.group);
  if (c.rule != d.rule) id += fmt::format(",rule={}", formats::name(c.rule));
  if (c.conv.division != d.conv.division) id += fmt::format(",division={}", formats::name(c.conv.division));
  if (c.conv.floor != d.conv.floor) id += fmt::format(",floor={}", formats::name(c.conv.floor));
  if (c.conv.arith != d.conv.arith) id += fmt::format(",arith={}", formats::name(c.conv.arith));
  if (c.round != d.round)
    id += c.round == formats::rounding::m_toward_zero ? ",round=rtz" : ",round=stochastic";
  if (c.over != d.over)
    id += c.over == formats::overflow::m_nan ? ",overflow=nan" : ",overflow=inf";
  if (o.input.empty()) id += fmt::format(",dist={}", name(o.dist));
  if (o.gemm.tokens > 0) {
    id += fmt::format(",gemm={},acc-model={}", o.gemm.tokens, o.gemm.acc_model);
    if (o.gemm.promote > 0) id += fmt::format(",acc-promote={}", o.gemm.promote);
    if (o.gemm.acc_fma) id += ",acc-fma";
  }
  id += fmt::format(",seed={})", o.seed);
  return id;
}

// Outlier flushes of one block: the shared definition (numprobe/formats/outlier_flushes.hpp),
// on the element-wise result.
std::int32_t outlier_flushes(const formats::quant_result& q, std::span<const double> x,
                             const formats::block_stats& b) {
  return formats::outlier_block_flushes(
      q.config, b, q.grid.cols, [&](std::int64_t i) { return x[i]; },
      [&](std::int64_t i, double) { return q.dequant[i] == 0.0; });
}

quant_metrics measure(const formats::quant_result& q, std::span<const double> x) {
  quant_metrics m;
  m.elements = static_cast<std::int64_t>(x.size());
  double sx = 0, se = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) continue;
    const double e = std::fabs(q.dequant[i] - x[i]);
    if (!std::isfinite(q.dequant[i])) {
      ++m.nonfinite_outputs;  // an overflow policy of nan/inf: an infinite error, not skipped
      se = std::numeric_limits<double>::infinity();
      m.max_abs = m.max_rel = std::numeric_limits<double>::infinity();
      continue;
    }
    sx += x[i] * x[i];
    se += e * e;
    m.max_abs = std::max(m.max_abs, e);
    if (x[i] != 0.0) m.max_rel = std::max(m.max_rel, e / std::fabs(x[i]));
  }
  m.rel_rms = sx > 0 ? std::sqrt(se / sx) : (se > 0 ? std::numeric_limits<double>::infinity() : 0.0);
  m.sqnr_db = se > 0 ? 10.0 * std::log10(sx / se) : std::numeric_limits<double>::infinity();
  m.flushed = q.flushed;
  m.clipped = q.clipped;
  m.scale_underflow_blocks = q.scale_underflow_blocks;
  m.nan_inputs = q.nan_inputs;
  m.inf_inputs = q.inf_inputs;
  m.blocks = static_cast<std::int64_t>(q.blocks.size());
  m.bits_per_element = formats::bits_per_element(q.config, q.grid.rows, q.grid.cols);
  return m;
}

worked_block work(const formats::quant_result& q, std::span<const double> x, std::int64_t idx) {
  worked_block w;
  w.index = idx;
  w.stats = q.blocks[static_cast<std::size_t>(idx)];
  const auto& b = w.stats;
  for (std::int64_t r = b.row0; r < b.row0 + b.rows; ++r)
    for (std::int64_t c = b.col0; c < b.col0 + b.cols; ++c) {
      if (w.flat.size() == k_worked_max) {
        w.truncated = true;
        break;
      }
      const std::int64_t i = r * q.grid.cols + c;
      w.flat.push_back(i);
      w.input.push_back(x[i]);
      w.codes.push_back(q.codes[i]);
      w.dequant.push_back(q.dequant[i]);
    }
  // A truncated view still shows the element that set the scale.
  if (w.truncated && b.argmax >= 0 &&
      std::find(w.flat.begin(), w.flat.end(), b.argmax) == w.flat.end()) {
    w.flat.back() = b.argmax;
    w.input.back() = x[b.argmax];
    w.codes.back() = q.codes[b.argmax];
    w.dequant.back() = q.dequant[b.argmax];
  }
  return w;
}

// MemAvailable from /proc/meminfo in bytes; 0 where it cannot be read (no check then).
double available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (f >> key >> kib) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return 0.0;
}

// The element-wise analysis holds, per element, the input and the dequantized value in double,
// the unpacked code (4 bytes) and its share of the block statistics: about 28 bytes. A tensor
// that would not fit is refused up front, naming the streamed alternative, instead of being
// killed by the OOM killer half way through.
void check_fits(const std::string& what, std::int64_t elements) {
  constexpr double bytes_per_element = 28.0;
  const double need = bytes_per_element * static_cast<double>(elements);
  const double have = available_memory();
  if (have > 0 && need > 0.8 * have)
    throw_input_error(what, fmt::format("{} elements need about {:.1f} GiB for the element-wise "
                                        "analysis, {:.1f} GiB of memory is available; `numprobe scan "
                                        "FILE --format SCHEME` analyses a file streamed in bounded memory",
                                        elements, need / 1073741824.0, have / 1073741824.0));
}

void load_input(const quant_probe_options& o, quant_report& r, std::int64_t& rows,
                std::int64_t& cols) {
  if (o.input.empty()) {
    if (o.rows <= 0 || o.cols <= 0) throw_input_error("--shape", "give --shape MxN or --input");
    if (o.rows > std::numeric_limits<std::int64_t>::max() / o.cols)
      throw_input_error("--shape", fmt::format("{}x{} overflows", o.rows, o.cols));
    check_fits("--shape", o.rows * o.cols);
    rows = o.rows;
    cols = o.cols;
    r.input = make_quant_input(o.dist, o.seed, rows, cols, o.config);  // ties follow the scheme's blocks
    r.input_shape = {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)};
    return;
  }
  const auto t = io::load_tensor(o.input);
  r.input_shape = t.shape;
  const auto n = static_cast<std::int64_t>(t.element_count());
  if (n == 0) throw_input_error(o.input, "the tensor is empty");
  check_fits(o.input, n);
  // Leading dimensions flatten into rows; the last dimension is the reduction axis.
  cols = t.shape.empty() ? 1 : static_cast<std::int64_t>(t.shape.back());
  rows = n / cols;
  if (o.rows > 0) {
    if (o.rows * o.cols != n)
      throw_input_error("--shape", fmt::format("{}x{} does not match {} ({} elements)", o.rows,
                                               o.cols, t.place(), n));
    rows = o.rows;
    cols = o.cols;
  }
  r.input = t.to_doubles();
}

}  // namespace

double quant_metric(const quant_metrics& m, const std::string& name) {
  const double n = static_cast<double>(std::max<std::int64_t>(m.elements, 1));
  if (name == "sqnr_db") return m.sqnr_db;
  if (name == "rel_rms") return m.rel_rms;
  if (name == "max_abs") return m.max_abs;
  if (name == "max_rel") return m.max_rel;
  if (name == "flushed") return static_cast<double>(m.flushed);
  if (name == "flushed_frac") return static_cast<double>(m.flushed) / n;
  if (name == "clipped") return static_cast<double>(m.clipped);
  if (name == "clipped_frac") return static_cast<double>(m.clipped) / n;
  if (name == "scale_underflow") return static_cast<double>(m.scale_underflow_blocks);
  if (name == "outlier_blocks") return static_cast<double>(m.outlier_blocks);
  if (name == "outlier_flushed") return static_cast<double>(m.outlier_flushed);
  if (name == "nonfinite") return static_cast<double>(m.nan_inputs + m.inf_inputs + m.nonfinite_outputs);
  if (name == "bits_per_element") return m.bits_per_element;
  if (name == "gemm_acc_rel_rms") return m.gemm_acc_rel_rms;
  if (name == "gemm_fp32_acc_rel_rms") return m.gemm_fp32_acc_rel_rms;
  if (name == "gemm_acc_ratio") return m.gemm_acc_ratio;
  if (name == "gemm_rel_rms") return m.gemm_rel_rms;
  if (name == "gemm_nonfinite") return static_cast<double>(m.gemm_nonfinite);
  throw_input_error("--bound", "unknown quant metric '" + name +
                                   "' (known: sqnr_db, rel_rms, max_abs, max_rel, flushed, "
                                   "flushed_frac, clipped, clipped_frac, scale_underflow, "
                                   "outlier_blocks, outlier_flushed, nonfinite, bits_per_element; "
                                   "with --gemm: gemm_acc_rel_rms, gemm_fp32_acc_rel_rms, gemm_acc_ratio, "
                                   "gemm_rel_rms, gemm_nonfinite)");
}

quant_report run_quant(const quant_probe_options& o) {
  for (const auto& b : o.bounds) {  // names first
    (void)quant_metric(quant_metrics{}, b.metric);
    if (o.gemm.tokens == 0 && b.metric.rfind("gemm_", 0) == 0)
      throw_input_error("--bound", fmt::format("{} is measured by the dequant GEMM: needs --gemm TOKENS --acc-model NAME",
                                               b.metric));
  }
  if (o.gemm.tokens > 0 && o.gemm.acc_model.empty())
    throw_input_error("--gemm", "needs --acc-model NAME (numprobe mma --list-models)");
  if (o.gemm.tokens > 4096) throw_input_error("--gemm", fmt::format("TOKENS must be 1..4096, got {}", o.gemm.tokens));
  if (!o.gemm.acc_model.empty()) (void)emu::find_mma_model(o.gemm.acc_model, "--acc-model");
  if (o.gemm.tokens == 0 && (!o.gemm.acc_model.empty() || o.gemm.promote != 0 || o.gemm.acc_fma))
    throw_input_error(!o.gemm.acc_model.empty() ? "--acc-model" : o.gemm.promote != 0 ? "--acc-promote" : "--acc-fma",
                      "applies to the dequant GEMM: needs --gemm TOKENS");
  quant_report r;
  std::int64_t rows = 0, cols = 0;
  load_input(o, r, rows, cols);
  auto shape = r.input_shape;
  auto out = analyze_quant(o, std::move(r.input), rows, cols);
  out.input_shape = std::move(shape);
  return out;
}

quant_report analyze_quant(const quant_probe_options& o, std::vector<double> input,
                           std::int64_t rows, std::int64_t cols) {
  const auto t0 = std::chrono::steady_clock::now();
  quant_report r;
  r.options = o;
  r.input = std::move(input);
  r.input_shape = {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)};
  r.case_id = case_id(o, rows, cols);
  r.result = formats::quantize(o.config, r.input, rows, cols);
  r.metrics = measure(r.result, r.input);

  // Outlier blocks, and the worst of them: by outlier flushes, then by amax (larger first).
  const auto& blocks = r.result.blocks;
  r.outlier_flushes.assign(blocks.size(), 0);
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(blocks.size()); ++i)
    r.outlier_flushes[i] = outlier_flushes(r.result, r.input, blocks[i]);
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (r.outlier_flushes[i] > 0) {
      ++r.metrics.outlier_blocks;
      r.metrics.outlier_flushed += r.outlier_flushes[i];
      r.worst_blocks.push_back(static_cast<std::int64_t>(i));
    }
  const auto by_harm = [&](std::int64_t a, std::int64_t b) {
    const auto fa = r.outlier_flushes[a], fb = r.outlier_flushes[b];
    return fa != fb ? fa > fb : blocks[a].amax > blocks[b].amax;
  };
  const std::size_t keep = std::min(o.worst_count, r.worst_blocks.size());
  std::partial_sort(r.worst_blocks.begin(), r.worst_blocks.begin() + keep, r.worst_blocks.end(),
                    by_harm);
  r.worst_blocks.resize(keep);
  std::int64_t shown = r.worst_blocks.empty() ? -1 : r.worst_blocks.front();
  if (shown < 0 && !blocks.empty()) {
    // No outlier block: show the block holding the largest absolute error instead.
    std::size_t imax = 0;
    double emax = -1;
    for (std::size_t i = 0; i < r.input.size(); ++i) {
      const double e = std::fabs(r.result.dequant[i] - r.input[i]);
      if (std::isfinite(r.input[i]) && !(e <= emax)) {
        emax = e;
        imax = i;
      }
    }
    const auto& g = r.result.grid;
    const auto row = static_cast<std::int64_t>(imax) / cols, col = static_cast<std::int64_t>(imax) % cols;
    shown = (row / g.block_rows) * g.grid_cols + col / g.block_cols;
  }
  if (shown >= 0) r.worked = work(r.result, r.input, shown);
  if (o.gemm.tokens > 0) {
    r.gemm = run_quant_gemm(o.gemm, o.config, r.result, r.input, rows, cols, o.seed);
    r.metrics.gemm_acc_rel_rms = r.gemm.acc_rel_rms;
    r.metrics.gemm_fp32_acc_rel_rms = r.gemm.fp32_acc_rel_rms;
    r.metrics.gemm_acc_ratio = r.gemm.acc_ratio();
    r.metrics.gemm_rel_rms = r.gemm.rel_rms;
    r.metrics.gemm_nonfinite = r.gemm.nonfinite;
  }

  for (const auto& b : o.bounds) {
    const double v = quant_metric(r.metrics, b.metric);
    if (!b.holds(v)) r.breaches.push_back({b.text(), v});
  }
  if (o.backend != "ref") check_quant_on_device(o, r, rows, cols);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace numprobe::probes
