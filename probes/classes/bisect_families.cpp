#include "probes/classes/bisect_families.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "numprobe/metrics/growth_fit.hpp"

namespace numprobe::probes {
namespace {

std::string pass_fail(const probe_outcome& o) {
  if (o.nan) return fmt::format("NaN/Inf in {} elements", o.nan);
  return o.failed ? "fails" : "passes";
}

// Decode kernels take T = 1..8 queries: family cases keep the case's T there (else T = S).
std::int64_t family_queries(const attention_case& base, bool decode) {
  return decode ? std::clamp<std::int64_t>(base.queries, 1, 8) : 0;
}

// The same visible keys as `c`, as explicit per-row ranges.
attention_case as_ranges(const attention_case& c) {
  if (c.ragged()) throw_unsupported("bisect", "a ragged batch has no one range per query row");
  attention_case r = c;
  r.ranges.clear();
  for (std::int64_t t = 0; t < c.t(); ++t) r.ranges.push_back(case_key_range(c, t));
  r.mask = mask_kind::m_ranges;
  r.window = 0;
  return r;
}

// Least-squares slope of log(y) on log(x) over the finite positive points (0 with fewer than 2):
// the bisect evidence, not a verdict (drift's growth verdict is metrics::fit_growth).
double slope_loglog(const std::vector<std::int64_t>& x, const std::vector<double>& y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!(y[i] > 0) || !std::isfinite(y[i])) continue;
    const double lx = std::log(static_cast<double>(x[i])), ly = std::log(y[i]);
    sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly, ++n;
  }
  if (n < 2) return 0.0;
  const double den = n * sxx - sx * sx;
  return den > 0 ? (n * sxy - sx * sy) / den : 0.0;
}

}  // namespace

attention_case family_case(const attention_case& base, std::int64_t length, input_dist d, mask_kind m,
                           bool decode) {
  std::int64_t queries = family_queries(base, decode);
  if (!decode && m == mask_kind::m_none && length > k_family_rows) queries = k_family_rows;
  return plain_case(base, length, queries, d, m);
}

bool numerator_only_loss(const probe_outcome& o) {
  return o.ran && !o.nan && o.bias <= -0.05 && !(o.lse_max_abs > 0.05);
}

attention_case plain_case(const attention_case& base, std::int64_t seq, std::int64_t queries, input_dist d,
                          mask_kind m) {
  attention_case c = reduced_case(base);
  c.seq = seq;
  c.queries = queries;
  c.dist = d;
  c.mask = m;
  c.window = 0;
  c.ranges.clear();
  c.softcap = 0.0;
  return c;
}

attention_case reduced_case(const attention_case& c) {
  attention_case r = c;
  r.batch = 1;
  r.heads = 2;
  r.kv_heads = 1;
  r.head_dim = std::min<std::int64_t>(c.head_dim, 64);
  r.scale = 0.0;
  return r;
}

probe_outcome measure(bisect_context& ctx, const std::string& stage, const attention_case& c,
                      const provider_options& po, const std::string& change) {
  const auto& s = ctx.evaluate(stage, c, po, change);
  probe_outcome o;
  o.ran = true;
  o.failed = s.failed;
  o.error = s.gate_value;
  o.rel_rms = s.rel_rms;
  o.ratio = s.ratio_to_naive;
  o.nan = s.nan_count;
  o.step = static_cast<std::size_t>(s.index);
  o.bias = s.bias;
  o.lse_max_abs = s.lse_max_abs;
  ctx.trace().back().decision = pass_fail(o);
  return o;
}

family_evidence run_families(bisect_context& ctx, const attention_case& base, std::int64_t length,
                             std::int64_t tile, std::int64_t diffuse_length) {
  family_evidence e;
  e.length = length;
  e.tile = tile > 0 ? tile : 64;
  const auto& po = ctx.base_provider();
  const bool dec = ctx.decode();
  const std::string at = fmt::format("S={}, small heads", length);
  auto run = [&](const attention_case& c, const std::string& what) {
    return measure(ctx, "family", c, po, fmt::format("{} ({})", what, at));
  };

  // Control: plain N(0,1) inputs, no mask, T = S.
  e.normal = run(family_case(base, length, input_dist::m_normal, mask_kind::m_none, dec), "dist=normal, mask=none");

  // Rescale or merge frame: a max that rises on every key tile against one set by the first key.
  e.rescale_stress = run(family_case(base, length, input_dist::m_rescale_stress, mask_kind::m_none, dec),
                         "dist=rescale-stress, mask=none");
  e.max_first = run(family_case(base, length, input_dist::m_max_first, mask_kind::m_none, dec),
                    "dist=max-first, mask=none");
  e.flat = run(family_case(base, length, input_dist::m_flat, mask_kind::m_none, dec),
               "dist=flat, mask=none (the max never rises: no rescale)");

  // Low-precision accumulation: near-uniform attention, long running sums.
  const std::int64_t dl = diffuse_length > 0 ? diffuse_length : length;
  e.diffuse_length = dl;
  e.diffuse = measure(ctx, "family", family_case(base, dl, input_dist::m_diffuse, mask_kind::m_none, dec), po,
                      fmt::format("dist=diffuse, mask=none (S={}, small heads)", dl));
  if (e.diffuse.failed && !e.diffuse.nan) {
    for (std::int64_t s = std::max<std::int64_t>(dl / 8, e.tile); s < dl; s *= 2) {
      const auto o = measure(ctx, "family", family_case(base, s, input_dist::m_diffuse, mask_kind::m_none, dec),
                             po, fmt::format("dist=diffuse, mask=none, S={} (growth)", s));
      e.diffuse_lengths.push_back(s);
      e.diffuse_errors.push_back(o.rel_rms);
      e.diffuse_ratios.push_back(o.ratio);
    }
    e.diffuse_lengths.push_back(dl);
    e.diffuse_errors.push_back(e.diffuse.rel_rms);
    e.diffuse_ratios.push_back(e.diffuse.ratio);
    e.diffuse_slope = slope_loglog(e.diffuse_lengths, e.diffuse_errors);
    // rel_rms of diffuse rows can fall with S while the kernel falls behind the naive baseline
    // (issue 14: l held in bf16): the ratio's slope is the length trend with the inputs divided out.
    e.diffuse_ratio_slope = slope_loglog(e.diffuse_lengths, e.diffuse_ratios);
    // The audit's growth rule (low-precision accumulation) on the same points.
    std::vector<double> xs(e.diffuse_lengths.begin(), e.diffuse_lengths.end());
    const metrics::growth_fit g = metrics::fit_growth(xs, e.diffuse_ratios);
    auto rise_of = [](const std::vector<double>& v) {
      return v.front() > 0 && std::isfinite(v.back()) ? v.back() / v.front() : 0.0;
    };
    e.diffuse_rise = std::max(rise_of(e.diffuse_ratios), rise_of(e.diffuse_errors));
    e.diffuse_ratio_slope_stderr = g.slope_stderr;
    const bool steady = std::isfinite(g.slope) && g.slope >= 0.25 && g.slope - 3.0 * g.slope_stderr > 0 &&
                        e.diffuse_rise >= 2.0;
    e.diffuse_grows = (e.diffuse_rise >= 4.0 && std::isfinite(g.slope) && g.slope > 0) || steady;
    ctx.trace().back().decision +=
        fmt::format("; rel_rms slope vs S {:.2f}, ratio_to_naive slope {:.2f} +- {:.2f}, rise x{:.3g}: {}",
                    e.diffuse_slope, e.diffuse_ratio_slope, g.slope_stderr, e.diffuse_rise,
                    e.diffuse_grows ? "grows with length" : "no growth with length");
  }

  {
    attention_case c = family_case(base, std::max<std::int64_t>(length, 4096), input_dist::m_sink, mask_kind::m_none, dec);
    if (!dec) c.queries = 64;
    e.sink = measure(ctx, "family", c, po,
                     fmt::format("dist=sink, mask=none, S={}, T={} (P ~ 1e-4 below the first key)", c.seq, c.t()));
    ctx.trace().back().decision += fmt::format("; O bias {:+.3g}, LSE max error {:.3g}{}", e.sink.bias,
                                               e.sink.lse_max_abs,
                                               numerator_only_loss(e.sink) ? ": mass lost from the numerator only" : "");
  }

  // Wavefront width: flat logits make attention exactly uniform and keep the max still, so no
  // rescale bug can pass for this class, and a half-wavefront sum is off by about 2x.
  for (std::int64_t s : {16, 24, 32})
    e.narrow_rows.push_back({s, measure(ctx, "family", family_case(base, s, input_dist::m_flat, mask_kind::m_none, dec),
                                        po, fmt::format("dist=flat, mask=none, S={} <= 32 keys (wavefront control)", s))});
  for (std::int64_t s : {33, 40, 48, 56, 63, 64, 65})
    e.wide_rows.push_back({s, measure(ctx, "family", family_case(base, s, input_dist::m_flat, mask_kind::m_none, dec),
                                      po, fmt::format("dist=flat, mask=none, S={} keys (33..65 lanes)", s))});

  // GQA mapping: a distinct constant V per KV head, with group size 2 and 1.
  {
    attention_case g = family_case(base, length, input_dist::m_constant_v, mask_kind::m_none, dec);
    g.heads = 4;
    g.kv_heads = 2;
    e.constant_v_grouped = run(g, "dist=constant-v, Hq=4, Hkv=2");
    g.heads = 2;
    g.kv_heads = 2;
    e.constant_v_ungrouped = run(g, "dist=constant-v, Hq=2, Hkv=2");
  }

  // Finite sentinel: whole rows of logits shifted to -1e3 ... -1e6.
  for (double sh : {-1e3, -1e4, -1e5, -1e6}) {
    attention_case c = family_case(base, length, input_dist::m_shifted, mask_kind::m_none, dec);
    c.logit_shift = sh;
    e.shifts.push_back({sh, run(c, fmt::format("dist=shifted, shift={:g}", sh))});
  }

  // Mask geometry: T != S under both causal alignments, window edges W-1, W, W+1; each against
  // the same key sets given as explicit ranges.
  if (dec) {
    // Decode: no window or top-left masks, no explicit ranges. Rows with no visible key: T = 8
    // queries over S = 5 keys, bottom-right causal (rows 0..2 see none, so every split is empty).
    attention_case c = family_case(base, 5, input_dist::m_normal, mask_kind::m_causal, dec);
    c.queries = 8;
    e.masked_rows = run(c, "T=8 > S=5, mask=causal (rows whose every split is empty)");
    return e;
  }
  auto mask_probe = [&](attention_case c, const std::string& label) {
    mask_pair m;
    m.label = label;
    m.kernel_mask = run(c, label);
    m.explicit_ranges = run(as_ranges(c), label + " as explicit key ranges");
    e.masks.push_back(m);
  };
  // At most 8 tiles, as the windows: the alignment shows at any S > T, and a length past 2^15
  // would let a position that wraps there (an index threshold) pass for a mask bug.
  for (mask_kind mk : {mask_kind::m_causal, mask_kind::m_causal_top_left}) {
    attention_case c = family_case(base, std::min<std::int64_t>(length, 8 * e.tile), input_dist::m_normal, mk);
    c.queries = 3;
    mask_probe(c, fmt::format("T=3, mask={}", to_string(mk)));
  }
  for (std::int64_t w : {e.tile - 1, e.tile, e.tile + 1}) {
    if (w < 1) continue;
    attention_case c = family_case(base, std::min<std::int64_t>(length, 8 * e.tile), input_dist::m_normal,
                                   mask_kind::m_window);
    c.window = w;
    mask_probe(c, fmt::format("mask=window, W={}, S={}", w, c.seq));
  }

  // Empty or masked rows: T > S causal leaves the first T-S rows with no visible key.
  {
    attention_case c = family_case(base, std::min<std::int64_t>(length, 8 * e.tile), input_dist::m_normal,
                                   mask_kind::m_causal);
    c.queries = c.seq + 2 * e.tile + 1;
    e.masked_rows = run(c, fmt::format("T={} > S={}, mask=causal (fully masked rows)", c.queries, c.seq));
  }
  return e;
}

}  // namespace numprobe::probes
