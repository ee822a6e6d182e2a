// The FP8 KV-cache study (see kvcache_probe.hpp).
//
// The attention is the double reference (reference::attention, mask none: every query vector
// sees every cached key) of the T query vectors over the first n tokens of the exact, the
// clipped-only, the rounded-only and the quantized K/V; the output error is
// metrics::compare_attention's rel_rms against the exact K/V. The scale groups, their amax and
// fp32 scales are the emulator's (src/kernels/emu/kv_scales.hpp), and the quantized cache is its
// fp8 cache value; the study only adds the split of each element's error into clipping and
// rounding, and the calibration of static scales on a prefix.
//
// Memory: the exact K and V of the longest context are held once (double, with the outlier
// tokens); a configuration holds one quantized K and V of the context (its rounded-only values,
// then patched into the quantized and the clipped-only ones) and a byte per element marking
// the clipped ones. Lengths are nested prefixes: the errors are read off at each length in one
// pass, and the attention runs on the prefixes of the same arrays.
#include "probes/kvcache/kvcache_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <numeric>
#include <span>

#include "numprobe/core/result.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/attention_output.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/core/memory_budget.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/metrics/attention_errors.hpp"
#include "numprobe/reference/attention.hpp"
#include "src/kernels/emu/kv_scales.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace numprobe::probes {

using result::json_number;  // non-finite values in the schema's spelling
namespace {

using formats::format_id;
constexpr std::uint64_t k_outlier_stream = 0x6f75746c;  // "outl"

// The study's context: T query vectors per head over S cached tokens (batch 1, mask none).
struct study_case {
  attention_case c;               // seq = the longest length
  std::vector<std::int64_t> rows;  // query rows 0 .. T-1
  std::vector<double> q;           // [T, Hq, D]
  std::vector<double> k, v;        // exact K and V times the outlier factors, [S, Hkv, D]
  emu::kv_shape shape;

  // The reference attention over the first n tokens of k and v.
  [[nodiscard]] attention_output attend(std::span<const double> kk, std::span<const double> vv, std::int64_t n) const {
    attention_case p = c;
    p.seq = n;
    const auto len = static_cast<std::size_t>(n * shape.kv_heads * shape.head_dim);
    return reference::attention(p, q, rows, kk.first(len), vv.first(len));
  }
  [[nodiscard]] double rel_rms(const attention_output& got, const attention_output& exact) const {
    return metrics::compare_attention(got, exact, c.dtype).rel_rms;
  }
};

// Per-length sums of one tensor: energy, clipped count, clip and round squared errors.
struct tensor_sums {
  double energy = 0, clip_sq = 0, round_sq = 0;
  std::int64_t elements = 0, clipped = 0;
  [[nodiscard]] kv_tensor_error error() const {
    kv_tensor_error e;
    e.elements = elements;
    e.clipped = clipped;
    if (energy > 0) {
      e.clip_rel_rms = std::sqrt(clip_sq / energy);
      e.round_rel_rms = std::sqrt(round_sq / energy);
      e.rel_rms = std::sqrt((clip_sq + round_sq) / energy);
    }
    return e;
  }
};

// One tensor (K or V) of one configuration through the fp8 cache. `cache` starts as the
// rounded-only values (rounded with an unbounded exponent range); `clipped` marks the elements
// whose rounding leaves the format's range; `at` holds the sums at every length.
struct quantized_tensor {
  const std::vector<double>* exact = nullptr;
  std::vector<double> scales;  // per scale group
  std::vector<double> cache;
  std::vector<std::uint8_t> clipped;
  std::vector<tensor_sums> at;

  [[nodiscard]] double scale_of(const emu::kv_shape& sh, emu::kv_scale_layout l, std::size_t i) const {
    const auto e = static_cast<std::int64_t>(i);
    const std::int64_t d = e % sh.head_dim, g = (e / sh.head_dim) % sh.kv_heads, pos = e / (sh.head_dim * sh.kv_heads);
    return scales[static_cast<std::size_t>(emu::kv_scale_index(l, sh, 0, pos, g, d))];
  }
  // The quantized cache: the clipped elements saturate, as the emulator's cache writes them.
  void saturate_clipped(const emu::kv_shape& sh, emu::kv_scale_layout l, format_id f) {
    for (std::size_t i = 0; i < cache.size(); ++i)
      if (clipped[i]) {
        const double s = scale_of(sh, l, i);
        cache[i] = emu::kv_code(f, (*exact)[i], s) * s;
      }
  }
  // From the quantized cache, the clipped-only one: exact values where nothing clipped.
  void restore_unclipped() {
    for (std::size_t i = 0; i < cache.size(); ++i)
      if (!clipped[i]) cache[i] = (*exact)[i];
  }
};

// Rounds x (the whole context) against its scales, marking clipped elements and reading the sums
// off at every length.
void quantize(const study_case& sc, emu::kv_scale_layout layout, format_id f, const std::vector<std::int64_t>& seqs,
              quantized_tensor& out) {
  const std::vector<double>& x = *out.exact;
  const double fmax = formats::info(f).max_finite;
  const emu::kv_shape& sh = sc.shape;
  out.cache.resize(x.size());
  out.clipped.assign(x.size(), 0);
  out.at.clear();
  tensor_sums sums;
  std::size_t i = 0, si = 0;
  for (std::int64_t pos = 0; pos < sh.seq; ++pos) {
    for (std::int64_t g = 0; g < sh.kv_heads; ++g)
      for (std::int64_t d = 0; d < sh.head_dim; ++d, ++i) {
        const double v = x[i];
        const double s = out.scales[static_cast<std::size_t>(emu::kv_scale_index(layout, sh, 0, pos, g, d))];
        const double lim = fmax * s;
        // Clipped: the value rounds past the format's max (a value within half a step above max
        // rounds to max anyway, as it can with an fp32 scale of amax / max: that is rounding).
        const double yr = round_unbounded(f, v / s);
        const bool clipped = std::fabs(yr) > fmax;
        const double r = yr * s;
        out.cache[i] = r;
        out.clipped[i] = clipped ? 1 : 0;
        sums.energy += v * v;
        if (clipped) {
          ++sums.clipped;
          sums.clip_sq += (std::fabs(v) - lim) * (std::fabs(v) - lim);
        } else {
          sums.round_sq += (r - v) * (r - v);
        }
      }
    sums.elements += sh.kv_heads * sh.head_dim;
    if (si < seqs.size() && pos + 1 == seqs[si]) {
      out.at.push_back(sums);
      ++si;
    }
  }
}

// Configurations run side by side, each holding a quantized K and V of the context: no more
// of them than the memory budget holds (the exact K/V are held once besides).
int config_threads(const study_case& sc, std::size_t configs) {
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  threads = std::min<int>(threads, static_cast<int>(std::max<std::size_t>(configs, 1)));
  const double elems = static_cast<double>(sc.k.size());
  const double per_config = 2.0 * elems * (sizeof(double) + 1.0);
  const double budget = memory_budget_bytes() - 2.0 * elems * sizeof(double);
  if (memory_budget_bytes() > 0 && per_config > 0)
    threads = std::clamp<int>(static_cast<int>(std::min(budget / per_config, 1e6)), 1, threads);
  return threads;
}

}  // namespace

double round_unbounded(format_id f, double y) {
  if (y == 0.0 || !std::isfinite(y)) return y;
  const auto& fi = formats::info(f);
  const int emin = std::ilogb(fi.min_normal);
  const int e = std::max(std::ilogb(y), emin);
  return std::ldexp(std::nearbyint(std::ldexp(y, fi.mantissa_bits - e)), e - fi.mantissa_bits);
}

std::vector<std::int64_t> kv_outlier_positions(const kvcache_options& o, std::int64_t seq) {
  std::vector<std::int64_t> out;
  if (o.outlier_rate <= 0) return out;
  for (std::int64_t pos = std::max<std::int64_t>(0, o.outlier_after); pos < seq; ++pos)
    if (uniform_open01(o.base.seed, k_outlier_stream, static_cast<std::uint64_t>(pos)) < o.outlier_rate)
      out.push_back(pos);
  return out;
}

kvcache_result run_kvcache(const kvcache_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.seqs.empty()) throw_input_error("--seq", "needs at least one length");
  if (o.formats.empty()) throw_input_error("--kv-format", "needs at least one format");
  if (o.layouts.empty()) throw_input_error("--kv-scale", "needs at least one layout");
  if (o.multipliers.empty()) throw_input_error("--scale-mult", "needs at least one multiplier");
  for (double m : o.multipliers)
    if (!(m > 0) || !std::isfinite(m)) throw_input_error("--scale-mult", fmt::format("must be finite and > 0, got {}", m));
  for (auto f : o.formats) {
    const auto& fi = formats::info(f);
    if (!fi.is_float || fi.bits != 8 || f == format_id::m_e8m0)
      throw_input_error("--kv-format", fmt::format("'{}' is not an fp8 format", fi.name));
  }
  if (!(o.outlier_rate >= 0 && o.outlier_rate <= 1)) throw_input_error("--outlier-rate", "must be in [0, 1]");
  if (!(o.outlier_scale > 0) || !std::isfinite(o.outlier_scale))
    throw_input_error("--outlier-scale", "must be finite and > 0");
  if (o.calib < 0) throw_input_error("--calib", "must be >= 0");
  if (o.bound && !(*o.bound > 0)) throw_input_error("--bound", "must be > 0");

  kvcache_result r;
  r.options = o;
  std::vector<std::int64_t> seqs = o.seqs;
  std::sort(seqs.begin(), seqs.end());
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  r.options.seqs = seqs;
  const std::int64_t S = seqs.back();
  if (seqs.front() < 1) throw_input_error("--seq", "lengths must be positive");
  attention_case c = o.base;
  c.batch = 1;
  c.seq = S;
  c.mask = mask_kind::m_none;
  if (c.queries < 1) c.queries = 1;
  c.validate();
  // Before any allocation: K and V in double four times (the rounded inputs and the
  // outlier-scaled copies) and one configuration's quantized cache (a double and a clip flag per
  // element, for K and V). config_threads() then runs as many configurations at once as fit.
  const double elems = static_cast<double>(S) * static_cast<double>(c.kv_heads) * static_cast<double>(c.head_dim);
  check_memory(elems > 1e9 && S < 1000000 ? "--kv-heads/--head-dim" : "--seq",
               fmt::format("a {}-token cache of {} KV heads x D={}", S, c.kv_heads, c.head_dim),
               elems * (4.0 * sizeof(double) + 2.0 * (sizeof(double) + 1.0)));
  r.context = S;
  r.calib_tokens = o.calib == 0 ? S : std::min(o.calib, S);
  r.outlier_positions = kv_outlier_positions(o, S);

  study_case sc;
  sc.c = c;
  sc.shape = {1, S, c.kv_heads, c.head_dim};
  sc.rows.resize(static_cast<std::size_t>(c.queries));
  std::iota(sc.rows.begin(), sc.rows.end(), 0);
  {
    const attention_inputs in(c, false);
    sc.q = in.q_rows(sc.rows);
    std::vector<double> factor(static_cast<std::size_t>(S), 1.0);
    for (auto p : r.outlier_positions) factor[static_cast<std::size_t>(p)] = o.outlier_scale;
    const std::int64_t rowlen = c.kv_heads * c.head_dim;
    const auto k = in.k(), v = in.v();
    sc.k.resize(k.size());
    sc.v.resize(v.size());
    for (std::int64_t pos = 0; pos < S; ++pos)
      for (std::int64_t e = 0; e < rowlen; ++e) {
        const auto i = static_cast<std::size_t>(pos * rowlen + e);
        sc.k[i] = k[i] * factor[static_cast<std::size_t>(pos)];
        sc.v[i] = v[i] * factor[static_cast<std::size_t>(pos)];
      }
  }

  // Exact outputs at every length.
  std::vector<attention_output> exact;
  for (std::int64_t s : seqs) exact.push_back(sc.attend(sc.k, sc.v, s));

  // amax per layout, once (the format and multiplier only rescale it).
  struct layout_amax {
    std::vector<double> k, v;
  };
  std::vector<layout_amax> amax(o.layouts.size());
  for (std::size_t li = 0; li < o.layouts.size(); ++li) {
    amax[li].k = emu::kv_amax(o.layouts[li], sc.shape, sc.k, r.calib_tokens);
    amax[li].v = emu::kv_amax(o.layouts[li], sc.shape, sc.v, r.calib_tokens);
  }

  struct config {
    std::size_t fi, li, mi;
  };
  std::vector<config> configs;
  for (std::size_t fi = 0; fi < o.formats.size(); ++fi)
    for (std::size_t li = 0; li < o.layouts.size(); ++li)
      for (std::size_t mi = 0; mi < o.multipliers.size(); ++mi) configs.push_back({fi, li, mi});
  r.points.resize(configs.size() * seqs.size());

  // One configuration per thread; the reference inside runs on that thread alone.
#pragma omp parallel for schedule(dynamic, 1) num_threads(config_threads(sc, configs.size()))
  for (std::int64_t ci = 0; ci < static_cast<std::int64_t>(configs.size()); ++ci) {
    const config cf = configs[static_cast<std::size_t>(ci)];
    const format_id f = o.formats[cf.fi];
    const auto layout = o.layouts[cf.li];
    const double mult = o.multipliers[cf.mi];
    quantized_tensor kq, vq;
    kq.exact = &sc.k;
    vq.exact = &sc.v;
    for (double a : amax[cf.li].k) kq.scales.push_back(emu::kv_scale(f, a, mult));
    for (double a : amax[cf.li].v) vq.scales.push_back(emu::kv_scale(f, a, mult));
    quantize(sc, layout, f, seqs, kq);
    quantize(sc, layout, f, seqs, vq);
    auto point = [&](std::size_t si) -> kvcache_point& {
      return r.points[static_cast<std::size_t>(ci) * seqs.size() + si];
    };
    // Where nothing clipped up to a length, the quantized K/V are the rounded-only ones there and
    // the clipped-only ones the exact ones: no attention is run for them.
    auto clips = [&](std::size_t si) { return kq.at[si].clipped + vq.at[si].clipped > 0; };
    for (std::size_t si = 0; si < seqs.size(); ++si) {
      kvcache_point& pt = point(si);
      pt.format = f;
      pt.layout = layout;
      pt.multiplier = mult;
      pt.seq = seqs[si];
      pt.outlier_tokens = static_cast<std::int64_t>(
          std::lower_bound(r.outlier_positions.begin(), r.outlier_positions.end(), pt.seq) - r.outlier_positions.begin());
      pt.k = kq.at[si].error();
      pt.v = vq.at[si].error();
      pt.out_round_rel_rms = sc.rel_rms(sc.attend(kq.cache, vq.cache, pt.seq), exact[si]);
      pt.out_rel_rms = pt.out_round_rel_rms;
      pt.out_clip_rel_rms = 0.0;
    }
    if (clips(seqs.size() - 1)) {
      kq.saturate_clipped(sc.shape, layout, f);
      vq.saturate_clipped(sc.shape, layout, f);
      for (std::size_t si = 0; si < seqs.size(); ++si)
        if (clips(si)) point(si).out_rel_rms = sc.rel_rms(sc.attend(kq.cache, vq.cache, seqs[si]), exact[si]);
      kq.restore_unclipped();
      vq.restore_unclipped();
      for (std::size_t si = 0; si < seqs.size(); ++si)
        if (clips(si)) point(si).out_clip_rel_rms = sc.rel_rms(sc.attend(kq.cache, vq.cache, seqs[si]), exact[si]);
    }
    for (std::size_t si = 0; si < seqs.size(); ++si) {
      kvcache_point& pt = point(si);
      // Default bound: twice the rounding-only error of the same configuration at the shortest
      // length (a same-precision baseline, as drift's ratio criterion): the error a cache of
      // this format and layout gives where nothing has grown yet.
      pt.bound = o.bound ? *o.bound : 2.0 * point(0).out_round_rel_rms;
      pt.fails = !(pt.out_rel_rms <= pt.bound);
      pt.dominant = pt.out_clip_rel_rms >= pt.out_round_rel_rms ? "clipping" : "rounding";
    }
  }

  // Summary: what drives the failures, and which layouts fix them.
  auto& sm = r.summary;
  for (const auto& p : r.points)
    if (p.fails) {
      ++sm.failures;
      (p.dominant == "clipping" ? sm.clip_driven : sm.round_driven)++;
    }
  sm.driver = sm.failures == 0 ? "none"
              : sm.clip_driven > sm.round_driven ? "clipping"
              : sm.round_driven > sm.clip_driven ? "rounding"
                                                 : "mixed";
  std::size_t m1 = 0;
  for (std::size_t mi = 0; mi < o.multipliers.size(); ++mi)
    if (std::fabs(std::log2(o.multipliers[mi])) < std::fabs(std::log2(o.multipliers[m1]))) m1 = mi;
  std::string fix_text;
  for (std::size_t fi = 0; fi < o.formats.size(); ++fi) {
    kvcache_summary::format_fix fx;
    fx.format = o.formats[fi];
    for (std::size_t li = 0; li < o.layouts.size(); ++li) {
      const std::size_t ci = (fi * o.layouts.size() + li) * o.multipliers.size() + m1;
      std::int64_t first_fail = 0;
      for (std::size_t si = 0; si < seqs.size(); ++si) {
        const auto& p = r.points[ci * seqs.size() + si];
        if (p.fails && first_fail == 0) first_fail = p.seq;
      }
      const std::string name(emu::to_string(o.layouts[li]));
      if (first_fail) fx.failing.push_back(fmt::format("{} (from S={})", name, first_fail));
      else fx.fixing.push_back(name);
    }
    if (fx.failing.empty()) fx.fixing.clear();  // nothing to fix
    if (!fx.failing.empty())
      fix_text += fmt::format(" {}: {} fail{}; {}.", formats::name(fx.format), fmt::join(fx.failing, ", "),
                              fx.failing.size() == 1 ? "s" : "",
                              fx.fixing.empty() ? "no layout passes at every length"
                                                : fmt::format("{} pass{} at every length", fmt::join(fx.fixing, ", "),
                                                              fx.fixing.size() == 1 ? "es" : ""));
    sm.fixes.push_back(std::move(fx));
  }
  if (sm.failures == 0)
    sm.text = "no configuration breaks the bound";
  else
    sm.text = fmt::format("{} drives the failures: {} of {} failing points have a larger clipping than rounding "
                          "contribution to the output error ({} rounding).{}",
                          sm.driver == "mixed" ? "neither alone" : sm.driver, sm.clip_driven, sm.failures,
                          sm.round_driven, fix_text.empty() ? "" : " At scale x" + fmt::format("{:g}", o.multipliers[m1]) + ":" + fix_text);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

nlohmann::json to_json(const kvcache_result& r) {
  auto tensor = [](const kv_tensor_error& e) {
    return nlohmann::json{{"elements", e.elements},
                          {"clipped", e.clipped},
                          {"clipped_fraction", e.elements ? static_cast<double>(e.clipped) / static_cast<double>(e.elements) : 0.0},
                          {"clip_rel_rms", json_number(e.clip_rel_rms)},
                          {"round_rel_rms", json_number(e.round_rel_rms)},
                          {"rel_rms", json_number(e.rel_rms)}};
  };
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : r.points)
    pts.push_back({{"format", formats::name(p.format)},
                   {"layout", emu::to_string(p.layout)},
                   {"scale_multiplier", p.multiplier},
                   {"seq", p.seq},
                   {"outlier_tokens", p.outlier_tokens},
                   {"k", tensor(p.k)},
                   {"v", tensor(p.v)},
                   {"out", {{"clip_rel_rms", json_number(p.out_clip_rel_rms)},
                            {"round_rel_rms", json_number(p.out_round_rel_rms)},
                            {"rel_rms", json_number(p.out_rel_rms)}}},
                   {"bound", p.bound},
                   {"fails", p.fails},
                   {"dominant", p.dominant}});
  nlohmann::json fixes = nlohmann::json::array();
  for (const auto& f : r.summary.fixes)
    fixes.push_back({{"format", formats::name(f.format)}, {"failing", f.failing}, {"fixing", f.fixing}});
  const auto& o = r.options;
  std::vector<std::string> fm, ly;
  for (auto f : o.formats) fm.emplace_back(formats::name(f));
  for (auto l : o.layouts) ly.emplace_back(emu::to_string(l));
  return {{"case", {{"dist", to_string(o.base.dist)}, {"dtype", formats::name(o.base.dtype)}, {"queries", o.base.queries},
                    {"heads", o.base.heads}, {"kv_heads", o.base.kv_heads}, {"head_dim", o.base.head_dim},
                    {"seed", o.base.seed}}},
          {"seqs", o.seqs},
          {"formats", fm},
          {"layouts", ly},
          {"scale_multipliers", o.multipliers},
          {"calibration_tokens", r.calib_tokens},
          {"outliers", {{"rate", o.outlier_rate}, {"after", o.outlier_after}, {"scale", o.outlier_scale},
                        {"positions", r.outlier_positions}}},
          {"points", pts},
          {"summary", {{"failures", r.summary.failures}, {"clip_driven", r.summary.clip_driven},
                       {"round_driven", r.summary.round_driven}, {"driver", r.summary.driver},
                       {"fixes", fixes}, {"text", r.summary.text}}},
          {"seconds", r.seconds}};
}

}  // namespace numprobe::probes
