// `numprobe scan RELEASE [--against ORIGINAL]`: release_probe.hpp.
#include "probes/release/release_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <limits>
#include <regex>
#include <span>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result_gates.hpp"
#include "probes/names/name_filter.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/formats/outlier_flushes.hpp"
#include "numprobe/io/checkpoint.hpp"
#include "numprobe/io/gguf.hpp"
#include "numprobe/io/regular_file.hpp"

namespace numprobe::probes {
namespace {

namespace nf = numprobe::formats;

// A model's config.json is kilobytes; the cap keeps a wrong file from filling memory.
constexpr std::size_t k_release_config_max_bytes = 100'000'000;

// Rows per slab: whole row_align groups, about 2^22 elements (32 MiB of doubles per array).
std::int64_t slab_rows(const io::release_tensor& t) {
  const std::int64_t want = std::max<std::int64_t>(1, (std::int64_t{1} << 22) / std::max<std::int64_t>(1, t.cols));
  const std::int64_t a = std::max<std::int64_t>(1, t.row_align);
  return std::max(a, want / a * a);
}

// The effective multiplier of block b of a slab: dequant = value(code) * multiplier (NVFP4's
// stored s_b times s_t).
double multiplier(const io::release_tensor& t, const io::release_slab& s, std::size_t b) {
  return s.scales[b] * (t.scheme.kind == nf::scheme_kind::m_nvfp4 ? s.tensor_scale : 1.0);
}

// GGUF: no code histogram (a block type's codes are not one numprobe format); the blocks' f16
// scale d (e8m0 for MXFP4): 0, subnormal (below 2^-14, where d keeps fewer than 11 bits), at the
// f16 maximum 65504 or beyond.
void add_value_stats(const io::release_slab& s, release_stats& st) {
  for (const double v : s.values) {
    if (!std::isfinite(v)) {
      ++st.nonfinite;
      continue;
    }
    st.abs_max = std::max(st.abs_max, std::fabs(v));
    st.sum_squares += v * v;
  }
}

void add_gguf_stats(const io::release_tensor& t, const io::release_slab& s, release_stats& st) {
  st.elements += static_cast<std::int64_t>(s.values.size());
  add_value_stats(s, st);
  const bool f16 = t.stored_as != "MXFP4";
  for (const double v : s.scales) {
    ++st.blocks;
    if (v == 0.0) {
      ++st.zero_scale_blocks;
      continue;
    }
    const double a = std::fabs(v);
    if (!std::isfinite(a)) {
      ++st.saturated_blocks;
      continue;
    }
    st.scale_min = st.scale_min == 0.0 ? a : std::min(st.scale_min, a);
    st.scale_max = std::max(st.scale_max, a);
    if (f16 && a < 0x1.0p-14) ++st.subnormal_scale_blocks;
    if (f16 && a >= 65504.0) ++st.saturated_blocks;
  }
}

void add_stats(const io::release_tensor& t, const io::release_slab& s, release_stats& st) {
  if (t.layout == io::release_layout::m_gguf) return add_gguf_stats(t, s, st);
  const auto& e = nf::info(t.scheme.element);
  if (st.code_histogram.empty()) st.code_histogram.assign(std::size_t{1} << std::min(e.storage_bits, 16), 0);
  for (const auto c : s.codes)
    if (c < st.code_histogram.size()) ++st.code_histogram[c];
  st.elements += static_cast<std::int64_t>(s.codes.size());
  add_value_stats(s, st);
  const auto sf = t.scheme.scale_format;
  // Saturated: the stored scale at the scale format's largest value, where a larger amax than
  // the scale can express would have been clipped. NVFP4's s_t = amax / (6 * 448) puts the block
  // holding the tensor's amax there by definition, so an NVFP4 count above the blocks sharing
  // that amax marks capped scales.
  const double smax = nf::info(sf).max_finite;
  for (std::size_t b = 0; b < s.scales.size(); ++b) {
    const double v = s.scales[b];
    ++st.blocks;
    if (v == 0.0) {
      ++st.zero_scale_blocks;
      continue;
    }
    const double a = std::fabs(v);
    st.scale_min = st.scale_min == 0.0 ? a : std::min(st.scale_min, a);
    st.scale_max = std::max(st.scale_max, a);
    if (sf == nf::format_id::m_e4m3fn && a < 0x1.0p-6) ++st.subnormal_scale_blocks;
    if (a >= smax) ++st.saturated_blocks;
  }
}

struct against_sums {
  double sig = 0.0, err = 0.0, max_abs = 0.0;
  std::int64_t n = 0;
};

// The slab's error against the original rows x (same layout as s.values).
void add_against(const io::release_tensor& t, const io::release_slab& s, const std::vector<double>& x,
                 against_sums& sums, release_against& a) {
  const std::int64_t rows = s.r1 - s.r0, cols = s.cols;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = s.values[i] - x[i];
    sums.sig += x[i] * x[i];
    sums.err += d * d;
    sums.max_abs = std::max(sums.max_abs, std::fabs(d));
    a.flushed += (x[i] != 0.0 && s.values[i] == 0.0) ? 1 : 0;
  }
  sums.n += static_cast<std::int64_t>(x.size());
  if (t.layout == io::release_layout::m_gguf) return;  // no numprobe block grid for ggml's blocks
  const auto g = nf::grid_of(t.scheme, rows, cols);
  if (static_cast<std::size_t>(g.count()) != s.scales.size()) return;  // no block view of this layout
  const bool asym = t.scheme.kind == nf::scheme_kind::m_asym;
  const double emax = nf::info(t.scheme.element).max_finite;
  const double ratio = nf::flush_ratio(t.scheme);
  for (std::int64_t br = 0; br < g.grid_rows; ++br)
    for (std::int64_t bc = 0; bc < g.grid_cols; ++bc) {
      const std::size_t b = static_cast<std::size_t>(br * g.grid_cols + bc);
      nf::block_stats blk;
      blk.row0 = br * g.block_rows;
      blk.col0 = bc * g.block_cols;
      blk.rows = std::min(g.block_rows, rows - blk.row0);
      blk.cols = std::min(g.block_cols, cols - blk.col0);
      blk.scale = multiplier(t, s, b);
      double lo = -emax * blk.scale, hi = emax * blk.scale;
      if (asym) {
        const double z = b < s.zero_points.size() ? s.zero_points[b] : 0.0;
        lo = (0.0 - z) * blk.scale;
        hi = (emax - z) * blk.scale;
      }
      for (std::int64_t r = blk.row0; r < blk.row0 + blk.rows; ++r)
        for (std::int64_t c = blk.col0; c < blk.col0 + blk.cols; ++c) {
          const std::int64_t i = r * cols + c;
          const double v = x[static_cast<std::size_t>(i)];
          if (std::fabs(v) > blk.amax) {
            blk.amax = std::fabs(v);
            blk.argmax = i;
          }
          if (v > hi || v < lo) ++a.clipped;
          if (v != 0.0 && s.values[static_cast<std::size_t>(i)] == 0.0) ++blk.flushed;
        }
      blk.scale_underflow = blk.scale == 0.0 && blk.amax > 0.0;
      const auto n = nf::outlier_block_flushes(
          t.scheme.kind, ratio, blk, cols, [&](std::int64_t i) { return x[static_cast<std::size_t>(i)]; },
          [&](std::int64_t i, double) { return s.values[static_cast<std::size_t>(i)] == 0.0; });
      if (n > 0) {
        ++a.outlier_blocks;
        a.outlier_flushed += n;
      }
    }
}

}  // namespace

void read_original_rows(const io::tensor_view& v, const io::release_tensor& t, std::int64_t r0, std::int64_t r1,
                        std::vector<double>& out) {
  const std::int64_t cols = t.cols;
  out.resize(static_cast<std::size_t>((r1 - r0) * cols));
  if (t.rope_heads > 0) {  // GGUF Q/K: stored row r is the original's row original_row(r)
    for (std::int64_t r = r0; r < r1; ++r)
      v.decode(static_cast<std::uint64_t>(io::original_row(t, r) * cols),
               std::span(out).subspan(static_cast<std::size_t>((r - r0) * cols), static_cast<std::size_t>(cols)));
  } else {
    v.decode(static_cast<std::uint64_t>(r0 * cols), out);
  }
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(out[i]))
      throw_input_error(v.place(), fmt::format("{} at element {}: the original must be finite",
                                               std::isnan(out[i]) ? "NaN" : "Inf",
                                               static_cast<std::int64_t>(i) + r0 * cols));
}

namespace {

// The stored scales as identify compares them: 8-bit scale formats by code, others by value.
identify_scales scales_for_identify(const io::release_tensor& t, const std::vector<double>& values,
                                    const std::vector<std::uint32_t>& codes) {
  identify_scales s;
  s.given = true;
  s.as_codes = nf::info(t.scheme.scale_format).storage_bits == 8;
  if (s.as_codes) s.codes = codes;
  else s.values = values;
  return s;
}

void scan_release_tensor(const io::release& rel, const io::checkpoint* orig, const release_scan_options& o,
                 release_tensor_report& rep, std::vector<std::string>& missing) {
  const auto& t = rep.tensor;
  std::optional<io::tensor_view> ov;
  if (orig) {
    const auto& names = orig->tensors();
    const std::string& want = io::original_name_of(t);
    const bool has = std::any_of(names.begin(), names.end(), [&](const auto& e) { return e.name == want; });
    if (!has) {
      missing.push_back(t.name);
    } else {
      ov = orig->get(want);
      check_original(*ov, t);
    }
  }
  const bool identify = ov && !t.scheme_name.empty() && t.rows * t.cols <= o.identify_max_elements;
  release_against a;
  against_sums sums;
  std::vector<double> x, all_x, all_scales;
  std::vector<std::uint32_t> all_codes, all_scale_codes;
  const std::int64_t step = slab_rows(t);
  for (std::int64_t r0 = 0; r0 < t.rows; r0 += step) {
    const std::int64_t r1 = std::min(t.rows, r0 + step);
    const auto s = rel.decode_rows(t, r0, r1);
    add_stats(t, s, rep.stats);
    if (!ov) continue;
    read_original_rows(*ov, t, r0, r1, x);
    add_against(t, s, x, sums, a);
    if (t.scheme.kind == nf::scheme_kind::m_nvfp4) {
      a.has_tensor_scale = true;
      a.release_tensor_scale = s.tensor_scale;
    }
    if (identify) {
      all_x.insert(all_x.end(), x.begin(), x.end());
      all_codes.insert(all_codes.end(), s.codes.begin(), s.codes.end());
      all_scales.insert(all_scales.end(), s.scales.begin(), s.scales.end());
      all_scale_codes.insert(all_scale_codes.end(), s.scale_codes.begin(), s.scale_codes.end());
    }
  }
  if (!ov) return;
  a.sqnr_db = sums.err > 0 ? 10.0 * std::log10(sums.sig / sums.err) : std::numeric_limits<double>::infinity();
  // Against an all-zero original a relative error has no scale: any error is infinitely large
  // relative to it (never 0, which would pass every bound while max_abs is not 0).
  a.rel_rms = sums.sig > 0 ? std::sqrt(sums.err / sums.sig)
              : sums.err > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  a.max_abs = sums.max_abs;
  a.flushed_frac = sums.n > 0 ? static_cast<double>(a.flushed) / static_cast<double>(sums.n) : 0.0;
  a.outlier_flushed_frac = sums.n > 0 ? static_cast<double>(a.outlier_flushed) / static_cast<double>(sums.n) : 0.0;
  if (identify) {
    const auto scales = scales_for_identify(t, all_scales, all_scale_codes);
    a.identify = identify_codes(t.scheme, all_x, t.rows, t.cols, all_codes, scales, t.name);
    if (a.has_tensor_scale) {
      double amax = 0.0;
      for (const double v : all_x) amax = std::max(amax, std::fabs(v));
      a.numprobe_tensor_scale = amax > 0 ? static_cast<double>(static_cast<float>(amax / (6.0 * 448.0))) : 1.0;
      a.tensor_scale_match = a.numprobe_tensor_scale == a.release_tensor_scale;
    }
  } else {
    a.identify_skipped = !t.stored_as.empty() ? "GGUF type " + t.stored_as + " is not a numprobe scheme"
                         : t.scheme_name.empty() ? "no numprobe scheme describes this layout's blocks"
                                               : fmt::format("over {} elements", o.identify_max_elements);
  }
  rep.against = std::move(a);
}

std::string release_shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

void check_original(const io::tensor_view& original, const io::release_tensor& t) {
  const auto d = original.dtype;
  const bool floating = d == io::dtype::m_f32 || d == io::dtype::m_f16 || d == io::dtype::m_bf16 || d == io::dtype::m_f64;
  if (original.shape != t.shape)
    throw_input_error(original.place(),
                      fmt::format("shape {} ({}), the release's {} is {} ({}): the original must be that weight, in "
                                  "the same shape (not transposed, not flattened)",
                                  release_shape_text(original.shape), io::name(d), t.name, release_shape_text(t.shape),
                                  t.scheme_name.empty() ? std::string(io::name(t.layout)) : t.scheme_name));
  if (!floating)
    throw_input_error(original.place(),
                      fmt::format("dtype {} (shape {}), the release's {} is {} ({}): the original must be a floating "
                                  "tensor (f32, f16, bf16 or f64), not integer or fp8 codes",
                                  io::name(d), release_shape_text(original.shape), t.name, release_shape_text(t.shape),
                                  t.scheme_name.empty() ? std::string(io::name(t.layout)) : t.scheme_name));
}

bool looks_like_release(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  std::error_code ec;
  const fs::path dir = fs::is_directory(p, ec) ? p : p.parent_path();
  if (fs::exists(dir / "config.json", ec)) {
    // A folder, a FIFO or a device named config.json is refused by name (exit 2), not read.
    const auto text = io::read_text_file(dir / "config.json", k_release_config_max_bytes, "config.json");
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("quantization_config")) return true;
  }
  if (fs::exists(dir / "hf_quant_config.json", ec) || fs::exists(dir / "quantize_config.json", ec)) return true;
  if (fs::is_directory(p, ec)) {
    // A folder is read as a release when it holds a checkpoint; otherwise the scan names it.
    for (const auto& e : fs::directory_iterator(p, ec)) {
      const auto name = e.path().filename().string();
      if (name.ends_with(".safetensors") || name.ends_with(".index.json") || name.ends_with(".gguf")) return true;
    }
    return false;
  }
  if (io::gguf_file::has_magic(p)) return true;
  const auto ext = p.extension().string();
  if (ext != ".safetensors" && ext != ".json") return false;  // one .npy tensor: never a release
  const auto ck = io::checkpoint::open(p);
  const char* suffixes[] = {".weight_scale", ".weight_packed", ".qweight", ".qzeros", ".weight_scale_inv",
                            ".weight_global_scale", ".weight_scale_2", "_blocks"};
  for (const auto& e : ck.tensors())
    for (const char* s : suffixes)
      if (e.name.ends_with(s)) return true;
  return false;
}

release_scan_report run_release_scan(const release_scan_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  release_scan_report r;
  r.options = o;
  const auto rel = io::release::open(o.release, o.layout);
  r.layout = std::string(io::name(rel.layout()));
  r.detected_by = rel.detected_by();
  r.passthrough = rel.passthrough().size();
  std::optional<io::checkpoint> orig;
  if (!o.against.empty()) orig = io::checkpoint::open(o.against);
  const std::regex filter = name_filter(o.filter);
  for (const auto& t : rel.tensors()) {
    if (!std::regex_search(t.name, filter)) continue;
    release_tensor_report rep;
    rep.tensor = t;
    scan_release_tensor(rel, orig ? &*orig : nullptr, o, rep, r.missing_in_original);
    r.tensors.push_back(std::move(rep));
  }
  if (r.tensors.empty())
    throw_input_error(o.filter.empty() ? o.release : "--filter", "no quantized tensor to scan");
  if (!o.against.empty() &&
      std::none_of(r.tensors.begin(), r.tensors.end(), [](const auto& t) { return t.against.has_value(); }))
    throw_input_error("--against", fmt::format("no quantized tensor of the release is in '{}' (e.g. '{}'): "
                                               "nothing to measure against", o.against, r.tensors.front().tensor.name));
  for (const auto& t : r.tensors)
    if (t.stats.nonfinite > 0) {
      r.nonfinite += t.stats.nonfinite;
      r.nonfinite_tensors.push_back(t.tensor.name);
    }
  for (const auto& b : o.bounds) {
    const double v = release_metric(r, b.metric);
    if (!b.holds(v)) r.breaches.push_back({b.text(), v});
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

double release_metric(const release_scan_report& r, const std::string& name) {
  const bool lowest = name == "sqnr_db";
  double worst = lowest ? std::numeric_limits<double>::infinity() : 0.0;
  bool any = false;
  for (const auto& t : r.tensors) {
    double v = 0.0;
    if (name == "saturated_blocks") v = static_cast<double>(t.tensor.rows > 0 ? t.stats.saturated_blocks : 0);
    else if (name == "subnormal_scale_blocks") v = static_cast<double>(t.stats.subnormal_scale_blocks);
    else if (name == "nonfinite") v = static_cast<double>(t.stats.nonfinite);
    else {
      if (!t.against) continue;
      const auto& a = *t.against;
      if (name == "sqnr_db") v = a.sqnr_db;
      else if (name == "rel_rms") v = a.rel_rms;
      else if (name == "flushed_frac") v = a.flushed_frac;
      else if (name == "outlier_flushed_frac") v = a.outlier_flushed_frac;
      else if (name == "clipped") v = static_cast<double>(a.clipped);
      else if (name == "identify_unmatched") v = a.identify && a.identify->match < 0 ? 1.0 : 0.0;
      else
        throw_input_error("--bound", fmt::format("unknown release metric '{}' (known: sqnr_db, rel_rms, flushed_frac, "
                                                 "outlier_flushed_frac, clipped, identify_unmatched, saturated_blocks, "
                                                 "subnormal_scale_blocks, nonfinite)", name));
    }
    any = true;
    // NaN (a NaN weight against the original) is the worst value: it never holds a bound.
    if (std::isnan(v) || std::isnan(worst)) worst = std::numeric_limits<double>::quiet_NaN();
    else worst = lowest ? std::min(worst, v) : std::max(worst, v);
  }
  if (!any)
    throw_input_error("--bound", r.options.against.empty()
                                     ? fmt::format("{} needs --against ORIGINAL", name)
                                     : fmt::format("{}: no tensor was measured against the original", name));
  return worst;
}

namespace {

// The table's scheme column: numprobe's scheme, else the GGUF type ("gguf Q4_1").
std::string scheme_text(const io::release_tensor& t) {
  return t.scheme_name.empty() && !t.stored_as.empty() ? "gguf " + t.stored_as : t.scheme_name;
}

}  // namespace

nlohmann::json to_json(const release_scan_report& r) {
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& t : r.tensors) {
    const auto& s = t.stats;
    nlohmann::json j{{"name", t.tensor.name},
                     {"layout", std::string(io::name(t.tensor.layout))},
                     {"scheme", t.tensor.scheme_name},
                     {"type", t.tensor.stored_as.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.tensor.stored_as)},
                     {"original_name", io::original_name_of(t.tensor)},
                     {"shape", t.tensor.shape},
                     {"record", t.tensor.record},
                     {"stats",
                      {{"elements", s.elements},
                       {"blocks", s.blocks},
                       {"code_histogram", s.code_histogram},
                       {"scale_min", s.scale_min},
                       {"scale_max", s.scale_max},
                       {"zero_scale_blocks", s.zero_scale_blocks},
                       {"subnormal_scale_blocks", s.subnormal_scale_blocks},
                       {"saturated_blocks", s.saturated_blocks},
                       {"nonfinite", s.nonfinite},
                       {"abs_max", s.abs_max},
                       {"rms", s.elements > 0 ? std::sqrt(s.sum_squares / static_cast<double>(s.elements)) : 0.0}}}};
    if (t.against) {
      const auto& a = *t.against;
      nlohmann::json aj{{"sqnr_db", result::json_number(a.sqnr_db)},
                        {"rel_rms", a.rel_rms},
                        {"max_abs", a.max_abs},
                        {"flushed", a.flushed},
                        {"flushed_frac", a.flushed_frac},
                        {"clipped", a.clipped},
                        {"outlier_blocks", a.outlier_blocks},
                        {"outlier_flushed", a.outlier_flushed},
                        {"outlier_flushed_frac", a.outlier_flushed_frac}};
      if (a.has_tensor_scale)
        aj["tensor_scale"] = {{"release", a.release_tensor_scale},
                              {"numprobe", a.numprobe_tensor_scale},
                              {"match", a.tensor_scale_match}};
      if (a.identify) aj["identify"] = to_json(*a.identify);
      else aj["identify"] = {{"match", nullptr}, {"skipped", a.identify_skipped}};
      j["against"] = std::move(aj);
    }
    ts.push_back(std::move(j));
  }
  nlohmann::json miss = r.missing_in_original;
  return {{"release", r.options.release}, {"against", r.options.against.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.options.against)},
          {"layout", r.layout}, {"detected_by", r.detected_by}, {"passthrough_tensors", r.passthrough},
          {"missing_in_original", miss}, {"tensors", ts}};
}

void fill_result(const release_scan_report& r, result::check_result& out) {
  out.probe = "scan";
  out.details = to_json(r);
  result::view_builder v(out);
  if (r.layout == io::name(io::release_layout::m_gguf))
    v.line(fmt::format("release   {} ({} tensors, each in its ggml type)", r.options.release, r.tensors.size()));
  else
    v.line(fmt::format("release   {} ({} quantized tensors, {} kept as stored)", r.options.release, r.tensors.size(),
                       r.passthrough));
  v.line(fmt::format("layout    {} (detected by {})", r.layout, r.detected_by));
  if (!r.options.against.empty()) v.line(fmt::format("against   {}", r.options.against));
  if (!r.missing_in_original.empty())
    v.line(fmt::format("missing   {} tensors not in the original, e.g. {}", r.missing_in_original.size(),
                       r.missing_in_original.front()));
  result::table tab;
  tab.title = "tensors";
  if (r.options.against.empty()) {
    tab.columns = {"tensor", "scheme", "shape", "abs_max", "scale_min", "scale_max", "zero_blk", "subnorm_blk", "sat_blk"};
    for (const auto& t : r.tensors)
      tab.rows.push_back({t.tensor.name, scheme_text(t.tensor), fmt::format("{}x{}", t.tensor.rows, t.tensor.cols),
                          result::sci(t.stats.abs_max),
                          t.stats.blocks > 0 ? result::sci(t.stats.scale_min) : "-",
                          t.stats.blocks > 0 ? result::sci(t.stats.scale_max) : "-",
                          std::to_string(t.stats.zero_scale_blocks), std::to_string(t.stats.subnormal_scale_blocks),
                          std::to_string(t.stats.saturated_blocks)});
  } else {
    tab.columns = {"tensor", "scheme", "sqnr_db", "rel_rms", "flushed%", "outlier_blk", "clipped", "identify"};
    for (const auto& t : r.tensors) {
      if (!t.against) {
        tab.rows.push_back({t.tensor.name, scheme_text(t.tensor), "-", "-", "-", "-", "-", "not in the original"});
        continue;
      }
      const auto& a = *t.against;
      std::string id = a.identify_skipped.empty() ? "" : "skipped: " + a.identify_skipped;
      if (a.identify) {
        const auto& c = a.identify->candidates;
        if (a.identify->match >= 0) {
          const auto n = std::count_if(c.begin(), c.end(), [](const auto& k) { return k.matches(); });
          id = c[static_cast<std::size_t>(a.identify->match)].text;
          if (n > 1) id = fmt::format("{} of {} match (the data does not separate them), e.g. {}", n, c.size(), id);
        } else {
          std::int64_t best = std::numeric_limits<std::int64_t>::max();
          for (const auto& k : c) best = std::min(best, k.code_mismatches + k.scale_mismatches);
          id = fmt::format("no match ({} mismatches at best)", best);
        }
      }
      tab.rows.push_back({t.tensor.name, scheme_text(t.tensor), result::fixed3(a.sqnr_db), result::sci(a.rel_rms),
                          fmt::format("{:.3f}", 100.0 * a.flushed_frac), std::to_string(a.outlier_blocks),
                          std::to_string(a.clipped), id});
    }
  }
  v.add_table(std::move(tab));
  add_nonfinite_gate(r.nonfinite, r.nonfinite_tensors, r.options.allow_nonfinite, "", out);
  for (const auto& b : r.options.bounds) {
    const double m = release_metric(r, b.metric);
    auto g = result::evaluate_gate(b, m, "");
    if (!g.held) out.outcome = result::status::m_fail;
    out.gates.push_back(std::move(g));
  }
  out.seconds = r.seconds;
}

void add_nonfinite_gate(std::int64_t nonfinite, const std::vector<std::string>& tensors, bool allowed,
                        const std::string& note, result::check_result& out) {
  result::gate g;
  g.bound = "nonfinite<=0";
  g.metric = "nonfinite";
  g.measured = static_cast<double>(nonfinite);
  g.held = nonfinite == 0 || allowed;
  g.basis = allowed ? "--allow-nonfinite: reported, not gated" : "a NaN or Inf weight is a broken release";
  if (nonfinite > 0 && !tensors.empty())
    result::view_builder(out).line(
        fmt::format("NON-FINITE {} decoded weights are NaN/Inf, in {}{}{}", nonfinite, tensors.front(),
                    tensors.size() > 1 ? fmt::format(" and {} more tensors", tensors.size() - 1) : "", note));
  if (!g.held) out.outcome = result::status::m_fail;
  out.gates.push_back(std::move(g));
}

}  // namespace numprobe::probes
