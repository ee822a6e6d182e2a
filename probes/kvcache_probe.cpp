// The FP8 KV-cache study (see kvcache_probe.hpp).
//
// Memory: the exact K and V of the longest context are generated once (double, as the
// attention inputs hold them); every configuration then streams over them block by block,
// quantizing each block three ways (clipped only, rounded only, both) into small buffers and
// feeding three online-softmax states per query vector, so no quantized copy of the context is
// kept. Lengths are nested prefixes: errors and outputs are read off at each length in one pass.
#include "probes/kvcache_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <numeric>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/error.hpp"
#include "numprobe/core/rng.hpp"
#include "probes/attention_probe.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace numprobe::probes {
namespace {

using formats::format_id;
constexpr std::int64_t k_block = 256;
constexpr std::uint64_t k_outlier_stream = 0x6f75746c;  // "outl"

// Online softmax state of every (query, head) for one variant of K/V.
struct online_state {
  std::int64_t d = 0;
  std::vector<double> m, l, o;  // [n], [n], [n, d]
  void reset(std::int64_t n, std::int64_t dim) {
    d = dim;
    m.assign(static_cast<std::size_t>(n), -std::numeric_limits<double>::infinity());
    l.assign(static_cast<std::size_t>(n), 0.0);
    o.assign(static_cast<std::size_t>(n * dim), 0.0);
  }
};

struct study_case {
  std::int64_t T = 0, Hq = 0, Hkv = 0, D = 0, group = 0;
  double sm_scale = 0.0;
  const double* k = nullptr;  // [S, Hkv, D]
  const double* v = nullptr;
  const std::vector<double>* q = nullptr;        // [T, Hq, D]
  const std::vector<double>* factor = nullptr;   // [S] outlier multipliers
};

// One block of keys [n, Hkv, D] into the state.
void attend_block(online_state& st, const study_case& sc, const double* kb, const double* vb, std::int64_t n) {
  const std::int64_t D = sc.D;
  std::vector<double> s(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < sc.T; ++t)
    for (std::int64_t h = 0; h < sc.Hq; ++h) {
      const std::int64_t g = h / sc.group, idx = t * sc.Hq + h;
      const double* q = sc.q->data() + idx * D;
      double mx = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < n; ++j) {
        const double* kr = kb + (j * sc.Hkv + g) * D;
        double dot = 0.0;
        for (std::int64_t e = 0; e < D; ++e) dot += q[e] * kr[e];
        s[static_cast<std::size_t>(j)] = dot * sc.sm_scale;
        mx = std::max(mx, s[static_cast<std::size_t>(j)]);
      }
      double& m = st.m[static_cast<std::size_t>(idx)];
      double& l = st.l[static_cast<std::size_t>(idx)];
      double* o = st.o.data() + idx * D;
      const double m_new = std::max(m, mx);
      const double alpha = std::exp(m - m_new);  // m = -inf on the first block: alpha = 0
      l *= alpha;
      for (std::int64_t e = 0; e < D; ++e) o[e] *= alpha;
      for (std::int64_t j = 0; j < n; ++j) {
        const double p = std::exp(s[static_cast<std::size_t>(j)] - m_new);
        l += p;
        const double* vr = vb + (j * sc.Hkv + g) * D;
        for (std::int64_t e = 0; e < D; ++e) o[e] += p * vr[e];
      }
      m = m_new;
    }
}

std::vector<double> outputs(const online_state& st) {
  std::vector<double> out(st.o.size());
  for (std::size_t i = 0; i < st.l.size(); ++i)
    for (std::int64_t e = 0; e < st.d; ++e)
      out[i * static_cast<std::size_t>(st.d) + static_cast<std::size_t>(e)] =
          st.o[i * static_cast<std::size_t>(st.d) + static_cast<std::size_t>(e)] / st.l[i];
  return out;
}

double rel_rms(const std::vector<double>& got, const std::vector<double>& ref) {
  double n = 0, d = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    n += (got[i] - ref[i]) * (got[i] - ref[i]);
    d += ref[i] * ref[i];
  }
  return d > 0 ? std::sqrt(n / d) : (n > 0 ? std::numeric_limits<double>::infinity() : 0.0);
}

std::int64_t scale_groups(emu::kv_scale_layout l, std::int64_t S, std::int64_t Hkv, std::int64_t D) {
  switch (l) {
    case emu::kv_scale_layout::m_tensor: return 1;
    case emu::kv_scale_layout::m_head: return Hkv;
    case emu::kv_scale_layout::m_channel: return Hkv * D;
    case emu::kv_scale_layout::m_token: return S * Hkv;
  }
  return 1;
}

std::int64_t group_of(emu::kv_scale_layout l, std::int64_t pos, std::int64_t g, std::int64_t d, std::int64_t Hkv,
                      std::int64_t D) {
  switch (l) {
    case emu::kv_scale_layout::m_tensor: return 0;
    case emu::kv_scale_layout::m_head: return g;
    case emu::kv_scale_layout::m_channel: return g * D + d;
    case emu::kv_scale_layout::m_token: return pos * Hkv + g;
  }
  return 0;
}

// amax per scale group: static layouts over the calibration prefix, token over every token.
std::vector<double> amax_groups(const double* x, const std::vector<double>& factor, emu::kv_scale_layout l,
                                std::int64_t S, std::int64_t calib, std::int64_t Hkv, std::int64_t D) {
  std::vector<double> a(static_cast<std::size_t>(scale_groups(l, S, Hkv, D)), 0.0);
  const std::int64_t n = l == emu::kv_scale_layout::m_token ? S : calib;
  for (std::int64_t pos = 0; pos < n; ++pos)
    for (std::int64_t g = 0; g < Hkv; ++g)
      for (std::int64_t d = 0; d < D; ++d) {
        const double v = std::fabs(x[(pos * Hkv + g) * D + d] * factor[static_cast<std::size_t>(pos)]);
        double& slot = a[static_cast<std::size_t>(group_of(l, pos, g, d, Hkv, D))];
        slot = std::max(slot, v);
      }
  return a;
}

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

struct variant_blocks {
  std::vector<double> clip, round, both;
};

// Quantizes rows [p0, p1) of x (times the outlier factor) three ways, adding to the sums.
// Returns the number of elements clipped in the block.
std::int64_t quantize_block(const double* x, const std::vector<double>& factor, std::int64_t p0, std::int64_t p1,
                            std::int64_t Hkv, std::int64_t D, emu::kv_scale_layout layout,
                            const std::vector<double>& scales, format_id f, double fmax, variant_blocks& out,
                            tensor_sums& sums) {
  const std::int64_t clipped_before = sums.clipped;
  const std::size_t n = static_cast<std::size_t>((p1 - p0) * Hkv * D);
  out.clip.resize(n);
  out.round.resize(n);
  out.both.resize(n);
  std::size_t i = 0;
  for (std::int64_t pos = p0; pos < p1; ++pos) {
    const double fac = factor[static_cast<std::size_t>(pos)];
    for (std::int64_t g = 0; g < Hkv; ++g)
      for (std::int64_t d = 0; d < D; ++d, ++i) {
        const double v = x[(pos * Hkv + g) * D + d] * fac;
        const double s = scales[static_cast<std::size_t>(group_of(layout, pos, g, d, Hkv, D))];
        const double y = v / s;
        const double lim = fmax * s;
        // Clipped: the value rounds past the format's max (a value within half a step above max
        // rounds to max anyway, as it can with an fp32 scale of amax / max: that is rounding).
        const double yr = round_unbounded(f, y);
        const bool clipped = std::fabs(yr) > fmax;
        const double r = yr * s;
        out.clip[i] = clipped ? std::copysign(lim, v) : v;
        out.round[i] = r;
        out.both[i] = clipped ? std::copysign(lim, v) : r;
        sums.energy += v * v;
        if (clipped) {
          ++sums.clipped;
          sums.clip_sq += (std::fabs(v) - lim) * (std::fabs(v) - lim);
        } else {
          sums.round_sq += (r - v) * (r - v);
        }
      }
  }
  sums.elements += static_cast<std::int64_t>(n);
  return sums.clipped - clipped_before;
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
  r.context = S;
  r.calib_tokens = o.calib == 0 ? S : std::min(o.calib, S);
  r.outlier_positions = kv_outlier_positions(o, S);

  const attention_inputs in(c, false);
  std::vector<std::int64_t> qrows(static_cast<std::size_t>(c.queries));
  std::iota(qrows.begin(), qrows.end(), 0);
  const std::vector<double> q = in.q_rows(qrows);
  std::vector<double> factor(static_cast<std::size_t>(S), 1.0);
  for (auto p : r.outlier_positions) factor[static_cast<std::size_t>(p)] = o.outlier_scale;

  study_case sc;
  sc.T = c.queries;
  sc.Hq = c.heads;
  sc.Hkv = c.kv_heads;
  sc.D = c.head_dim;
  sc.group = c.group();
  sc.sm_scale = c.softmax_scale();
  sc.k = in.k().data();
  sc.v = in.v().data();
  sc.q = &q;
  sc.factor = &factor;
  const std::int64_t rowlen = sc.Hkv * sc.D, nvec = sc.T * sc.Hq;

  // Block boundaries: every k_block tokens and every length.
  std::vector<std::int64_t> cuts;
  for (std::int64_t p = 0, si = 0; p < S;) {
    std::int64_t next = std::min(p + k_block, S);
    while (si < static_cast<std::int64_t>(seqs.size()) && seqs[static_cast<std::size_t>(si)] <= p) ++si;
    if (si < static_cast<std::int64_t>(seqs.size())) next = std::min(next, seqs[static_cast<std::size_t>(si)]);
    cuts.push_back(next);
    p = next;
  }

  // Exact outputs at every length.
  std::vector<std::vector<double>> exact(seqs.size());
  {
    online_state st;
    st.reset(nvec, sc.D);
    std::vector<double> kb, vb;
    std::int64_t p0 = 0;
    std::size_t si = 0;
    for (std::int64_t p1 : cuts) {
      kb.resize(static_cast<std::size_t>((p1 - p0) * rowlen));
      vb.resize(kb.size());
      for (std::int64_t pos = p0; pos < p1; ++pos)
        for (std::int64_t e = 0; e < rowlen; ++e) {
          kb[static_cast<std::size_t>((pos - p0) * rowlen + e)] = sc.k[pos * rowlen + e] * factor[static_cast<std::size_t>(pos)];
          vb[static_cast<std::size_t>((pos - p0) * rowlen + e)] = sc.v[pos * rowlen + e] * factor[static_cast<std::size_t>(pos)];
        }
      attend_block(st, sc, kb.data(), vb.data(), p1 - p0);
      if (si < seqs.size() && p1 == seqs[si]) exact[si++] = outputs(st);
      p0 = p1;
    }
  }

  // Scales per layout (amax once per layout; the format and multiplier only rescale them).
  struct layout_amax {
    std::vector<double> k, v;
  };
  std::vector<layout_amax> amax(o.layouts.size());
  for (std::size_t li = 0; li < o.layouts.size(); ++li) {
    amax[li].k = amax_groups(sc.k, factor, o.layouts[li], S, r.calib_tokens, sc.Hkv, sc.D);
    amax[li].v = amax_groups(sc.v, factor, o.layouts[li], S, r.calib_tokens, sc.Hkv, sc.D);
  }

  struct config {
    std::size_t fi, li, mi;
  };
  std::vector<config> configs;
  for (std::size_t fi = 0; fi < o.formats.size(); ++fi)
    for (std::size_t li = 0; li < o.layouts.size(); ++li)
      for (std::size_t mi = 0; mi < o.multipliers.size(); ++mi) configs.push_back({fi, li, mi});
  r.points.resize(configs.size() * seqs.size());

#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t ci = 0; ci < static_cast<std::int64_t>(configs.size()); ++ci) {
    const config cf = configs[static_cast<std::size_t>(ci)];
    const format_id f = o.formats[cf.fi];
    const auto layout = o.layouts[cf.li];
    const double mult = o.multipliers[cf.mi];
    const double fmax = formats::info(f).max_finite;
    auto scales_of = [&](const std::vector<double>& a) {
      std::vector<double> s(a.size());
      // s = mult * amax / max_finite, held in fp32 as kernels hold scales (amax 0: scale 1).
      for (std::size_t i = 0; i < a.size(); ++i)
        s[i] = a[i] > 0 ? static_cast<double>(static_cast<float>(mult * a[i] / fmax)) : 1.0;
      return s;
    };
    const auto ks = scales_of(amax[cf.li].k), vs = scales_of(amax[cf.li].v);
    online_state st_clip, st_round, st_both;
    st_clip.reset(nvec, sc.D);
    st_round.reset(nvec, sc.D);
    st_both.reset(nvec, sc.D);
    variant_blocks kb, vb;
    tensor_sums ksum, vsum;
    std::int64_t p0 = 0;
    std::size_t si = 0;
    double short_round = 0.0;
    // Until the first clipped element, the quantized K/V equal the rounded-only ones: the
    // "both" state is the "round" state and is not updated separately.
    bool both_is_round = true;
    for (std::int64_t p1 : cuts) {
      const std::int64_t clipped = quantize_block(sc.k, factor, p0, p1, sc.Hkv, sc.D, layout, ks, f, fmax, kb, ksum) +
                                   quantize_block(sc.v, factor, p0, p1, sc.Hkv, sc.D, layout, vs, f, fmax, vb, vsum);
      if (both_is_round && clipped > 0) {
        st_both = st_round;
        both_is_round = false;
      }
      attend_block(st_clip, sc, kb.clip.data(), vb.clip.data(), p1 - p0);
      attend_block(st_round, sc, kb.round.data(), vb.round.data(), p1 - p0);
      if (!both_is_round) attend_block(st_both, sc, kb.both.data(), vb.both.data(), p1 - p0);
      if (si < seqs.size() && p1 == seqs[si]) {
        kvcache_point& pt = r.points[static_cast<std::size_t>(ci) * seqs.size() + si];
        pt.format = f;
        pt.layout = layout;
        pt.multiplier = mult;
        pt.seq = p1;
        pt.outlier_tokens = static_cast<std::int64_t>(
            std::lower_bound(r.outlier_positions.begin(), r.outlier_positions.end(), p1) - r.outlier_positions.begin());
        pt.k = ksum.error();
        pt.v = vsum.error();
        pt.out_clip_rel_rms = rel_rms(outputs(st_clip), exact[si]);
        pt.out_round_rel_rms = rel_rms(outputs(st_round), exact[si]);
        pt.out_rel_rms = both_is_round ? pt.out_round_rel_rms : rel_rms(outputs(st_both), exact[si]);
        // Default bound: twice the rounding-only error of the same configuration at the shortest
        // length (a same-precision baseline, as drift's ratio criterion): the error a cache of
        // this format and layout gives where nothing has grown yet.
        if (si == 0) short_round = pt.out_round_rel_rms;
        pt.bound = o.bound ? *o.bound : 2.0 * short_round;
        pt.fails = !(pt.out_rel_rms <= pt.bound);
        pt.dominant = pt.out_clip_rel_rms >= pt.out_round_rel_rms ? "clipping" : "rounding";
        ++si;
      }
      p0 = p1;
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
