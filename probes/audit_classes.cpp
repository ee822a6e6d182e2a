// The class probes of `numprobe audit`: one function per bug class of NUMERICS.md, each a probe
// designed for the class against a control that differs only in the mechanism under suspicion.
// Probes run on small heads (no class here depends on the head count, except GQA, which sets its
// own), at lengths laid out for the kernel's key tile, or for every common tile size when the
// tile is unknown.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <set>

#include "numprobe/core/error.hpp"
#include "numprobe/metrics/growth_fit.hpp"
#include "probes/audit.hpp"
#include "probes/bisect_families.hpp"
#include "probes/bisect_fp8.hpp"
#include "probes/bisect_precision.hpp"

namespace numprobe::probes {
namespace {

// Tile sizes real kernels use (FlashAttention, FlashInfer, Triton tutorials, CUTLASS, CK).
constexpr std::int64_t k_common_tiles[] = {16, 32, 48, 64, 80, 96, 112, 128, 192, 256};
// Quiet lengths for an unknown tile: multiples of 768 = 2^8 * 3 are multiples of every common
// tile except 80 and 112.
constexpr std::int64_t k_unknown_quantum = 768;

struct measured {
  bool ran = false;
  bool error = false;
  std::string message;
  std::string case_id;
  bisect_step step;
  [[nodiscard]] bool failed() const { return ran && !error && step.failed; }
  [[nodiscard]] bool passed() const { return ran && !error && !step.failed; }
  [[nodiscard]] bool nonfinite() const { return ran && !error && step.nan_count > 0; }
};

class runner {
 public:
  // `po`: the provider the class probes run on (the kernel under test, with any fp8 points
  // restored: they are the fp8 class's to judge, and their rounding would blur the others).
  runner(bisect_context& ctx, std::vector<audit_error>& errors, provider_options po)
      : m_ctx(ctx), m_errors(errors), m_po(std::move(po)) {}
  [[nodiscard]] const provider_options& default_po() const { return m_po; }

  measured run(audit_class& k, const attention_case& c, const std::string& change,
               const provider_options* po = nullptr) {
    measured m;
    m.ran = true;
    m.case_id = c.id();
    try {
      const auto& s = m_ctx.evaluate("audit", c, po ? *po : m_po, fmt::format("{}: {}", k.name, change));
      m.step = s;
      m_ctx.trace().back().decision = s.nan_count ? fmt::format("NaN/Inf x{}", s.nan_count)
                                                  : (s.failed ? "fails" : "passes");
      k.steps.push_back(s.index);
    } catch (const error& e) {
      if (e.code() != exit_code::m_backend) throw;
      m.error = true;
      m.message = e.what();
      m_errors.push_back({k.name, m.case_id, m.message});
    }
    k.cases.push_back(m.case_id);
    return m;
  }

  [[nodiscard]] std::string describe(const measured& m) const {
    if (!m.ran) return "not run";
    if (m.error) return fmt::format("{}: backend error ({})", m.case_id, m.message);
    const bisect_step& s = m.step;
    if (s.nan_count) return fmt::format("{}: NaN/Inf in {} elements [step {}]", m.case_id, s.nan_count, s.index);
    const bound& b = m_ctx.bounds().front();
    return fmt::format("{}: {} {:.3g} ({} {}) [step {}]", m.case_id, b.metric, s.gate_value,
                       s.failed ? "breaks" : "holds", b.text(), s.index);
  }

  bisect_context& ctx() { return m_ctx; }

 private:
  bisect_context& m_ctx;
  std::vector<audit_error>& m_errors;
  provider_options m_po;
};

// A probe fails where its control passes (or fails 10x less).
bool contrast(const measured& probe, const measured& control) {
  if (!probe.failed() || !control.ran || control.error) return false;
  if (!control.failed()) return true;
  return !control.nonfinite() && (probe.nonfinite() || probe.step.rel_rms >= 10.0 * control.step.rel_rms);
}

struct layout {
  std::int64_t tile_q = 0, tile_k = 0;  // 0: unknown
  bool quick = false;
  bool decode = false;
  std::int64_t seq_hi = 8192;
  std::int64_t decode_queries = 1;

  // The smallest quiet length >= n: a multiple of the key (and query) tile, so no tail tile is
  // partial, or of 768 for an unknown tile.
  [[nodiscard]] std::int64_t quiet(std::int64_t n) const {
    std::int64_t m = k_unknown_quantum;
    if (tile_k > 0) m = tile_q > 0 ? std::lcm(tile_q, tile_k) : tile_k;
    if (m > n && tile_k > 0) m = tile_k;
    return std::max<std::int64_t>(m, (n + m - 1) / m * m);
  }
  [[nodiscard]] std::int64_t tile_or(std::int64_t fallback) const { return tile_k > 0 ? tile_k : fallback; }
};

attention_case family(const attention_case& base, const layout& L, std::int64_t seq, input_dist d,
                      mask_kind m = mask_kind::m_none) {
  attention_case c = reduced_case(base);
  c.seq = seq;
  c.queries = L.decode ? L.decode_queries : 0;
  c.dist = d;
  c.mask = m;
  c.window = 0;
  c.ranges.clear();
  c.softcap = 0.0;
  return c;
}

void verdict(audit_class& k, bool fail) { k.verdict = fail ? "fail" : "pass"; }

// --- empty or masked split ------------------------------------------------------------------
audit_class empty_split(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"empty or masked split", "pass", {}, {}, {}};
  const std::int64_t b = L.tile_or(64);
  const auto control = r.run(k, family(base, L, L.quiet(1024), input_dist::m_normal), "control: no mask, no empty row");
  std::vector<measured> probes;
  if (L.decode) {
    // T=8 over S=5: rows 0..2 see no key. S=5 is a partial tile, so its control is the same
    // length without masked rows: NaN there belongs to the tail tile, not to empty rows.
    attention_case c = family(base, L, 5, input_dist::m_normal, mask_kind::m_causal);
    c.queries = 8;
    attention_case c1 = family(base, L, 5, input_dist::m_normal);
    c1.queries = 1;
    const auto short_control = r.run(k, c1, "control: T=1 over S=5, no masked row");
    const auto short_probe = r.run(k, c, "T=8 > S=5 causal: rows whose every split is empty");
    if (!short_control.nonfinite()) probes.push_back(short_probe);
    c = family(base, L, L.quiet(512), input_dist::m_normal, mask_kind::m_causal);
    probes.push_back(r.run(k, c, "causal decode: the last query's split holds fewer keys"));
    if (r.default_po().backend == "emu" || r.default_po().backend == "cuda") {
      // More splits than key tiles at a whole number of tiles: splits past the keys are empty
      // among non-empty ones, with no partial tile anywhere.
      // 32 splits over 128 keys: 4-key chunks on a kernel that splits by count (cuda), so the
      // causal queries' last chunks are empty; whole-tile splits (emu) leave the later ones empty.
      for (std::int64_t n : {4, 16, 32}) {
        provider_options po = r.default_po();
        po.knobs.erase("split-size");
        po.knobs["splits"] = std::to_string(n);
        attention_case e = family(base, L, 2 * b, input_dist::m_normal, mask_kind::m_causal);
        e.queries = 8;
        probes.push_back(r.run(k, e, fmt::format("{} splits over S={} (2 key tiles): some splits empty", n, e.seq), &po));
      }
    }
  } else {
    attention_case a = family(base, L, L.quiet(256), input_dist::m_normal, mask_kind::m_causal);
    a.queries = a.seq + 2 * b + 1;
    probes.push_back(r.run(k, a, fmt::format("T={} > S={} causal: {} fully masked rows", a.queries, a.seq, 2 * b + 1)));
    attention_case w = family(base, L, L.quiet(1024), input_dist::m_normal, mask_kind::m_window);
    w.window = b;
    probes.push_back(r.run(k, w, fmt::format("window W={}: every row's early key tiles fully masked", b)));
    probes.push_back(r.run(k, family(base, L, L.quiet(1024), input_dist::m_normal, mask_kind::m_causal),
                           "causal T=S: early rows leave later key blocks (splits) empty"));
  }
  bool fail = false;
  for (const auto& p : probes) {
    if (p.nonfinite() && !control.nonfinite() && control.ran && !control.error) {
      fail = true;
      k.evidence.push_back(fmt::format("NaN/Inf where keys are masked: {}; control without masked keys: {}",
                                       r.describe(p), r.describe(control)));
    }
  }
  if (!fail) {
    k.evidence.push_back(fmt::format("no NaN/Inf in fully masked rows, window edges or empty key blocks ({} probes); "
                                     "control {}", probes.size(), r.describe(control)));
  }
  verdict(k, fail);
  return k;
}

// --- finite sentinel ------------------------------------------------------------------------
audit_class finite_sentinel(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"finite sentinel", "pass", {}, {}, {}};
  const std::int64_t s = L.quiet(256);
  std::vector<std::pair<double, measured>> shifts;
  for (double sh : {-1e3, -1e4, -1e5, -1e6}) {
    attention_case c = family(base, L, s, input_dist::m_shifted);
    c.logit_shift = sh;
    shifts.emplace_back(sh, r.run(k, c, fmt::format("every logit of a row shifted to {:g}", sh)));
  }
  // Judged on rel_rms, not on the ratio (the naive baseline rounds scores to the input dtype and
  // is meaningless at such shifts): a collapse is O ~ 0 (rel_rms ~ 1) or NaN, while -1e3 is fine.
  // A healthy kernel with fp32 scores loses a few percent at -1e6, far from a collapse.
  const measured& small = shifts.front().second;
  bool fail = false;
  if (small.ran && !small.error && !small.nonfinite() && small.step.rel_rms < 0.1) {
    for (std::size_t i = 1; i < shifts.size(); ++i) {
      const measured& m = shifts[i].second;
      if (!m.ran || m.error) continue;
      const bool collapse = m.nonfinite() || (m.step.rel_rms >= 0.5 && m.step.rel_rms >= 10.0 * small.step.rel_rms);
      if (collapse) {
        fail = true;
        k.evidence.push_back(fmt::format("logits at {:g}: output collapses (rel_rms {:.3g}{}) against rel_rms {:.3g} at "
                                         "-1e3: {}", shifts[i].first, m.step.rel_rms,
                                         m.nonfinite() ? ", NaN/Inf" : "", small.step.rel_rms, r.describe(m)));
        break;
      }
    }
    if (!fail)
      k.evidence.push_back(fmt::format("no collapse for shifts -1e3 ... -1e6 (rel_rms {:.3g} ... {:.3g})",
                                       small.step.rel_rms, shifts.back().second.step.rel_rms));
  } else {
    k.evidence.push_back(fmt::format("the -1e3 control does not hold (rel_rms >= 0.1 or NaN): {}; no sentinel "
                                     "contrast possible", r.describe(small)));
  }
  verdict(k, fail);
  return k;
}

// --- rescale or merge frame -----------------------------------------------------------------
audit_class rescale_frame(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"rescale or merge frame", "pass", {}, {}, {}};
  const std::int64_t s = L.quiet(L.quick ? 1024 : 2048);
  const auto rs = r.run(k, family(base, L, s, input_dist::m_rescale_stress), "scores rise on every key tile (rescale stress)");
  const auto mf = r.run(k, family(base, L, s, input_dist::m_max_first), "control: the row max on the first key");
  // Second control: flat logits spread the mass over every key as rescale stress does, with a
  // row max that never rises. A reduction or accumulation bug fails it too; a rescale bug cannot.
  const auto flat = r.run(k, family(base, L, s, input_dist::m_flat), "control: flat logits, the max never rises");
  const bool fail = contrast(rs, mf) && contrast(rs, flat);
  k.evidence.push_back(fmt::format("rescale stress {}; max first {}; flat {}", r.describe(rs), r.describe(mf),
                                   r.describe(flat)));
  if (rs.ran && mf.ran && !rs.error && !mf.error)
    k.evidence.push_back(fmt::format("O rel_rms {:.3g} vs {:.3g}; LSE max abs error {:.3g} vs {:.3g} (O wrong with LSE "
                                     "right points at the O rescale)", rs.step.rel_rms, mf.step.rel_rms,
                                     rs.step.lse_max_abs, mf.step.lse_max_abs));
  if (fail && r.ctx().state_knobs() && !rs.nonfinite()) {
    attention_case c = family(base, L, s, input_dist::m_rescale_stress);
    const auto m = check_forced_rescale(r.ctx(), c, rs.step.gate_value);
    k.steps.push_back(static_cast<int>(r.ctx().trace().size()));
    k.cases.push_back(c.id());
    k.evidence.push_back(fmt::format("disabled: the rescale forced on every tile {} the error ({:.3g} -> {:.3g})",
                                     m.removes ? "removes" : "does not remove", m.before, m.after));
  }
  verdict(k, fail);
  return k;
}

// --- low-precision accumulation -------------------------------------------------------------
audit_class accumulation(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"low-precision accumulation", "pass", {}, {}, {}};
  // The full length even in quick runs: a sum held short shows only at length (bf16 stalls
  // near 256 increments, fp16 near 2048), and few queries keep the long cases cheap.
  const std::int64_t hi = std::max<std::int64_t>(L.quiet(1024), L.seq_hi);
  std::set<std::int64_t> lens;
  for (std::int64_t n = 128; n < hi; n *= 2) lens.insert(L.quiet(n));
  if (!L.quick)  // half-octave points: more lengths for the fit where the tile allows them
    for (std::int64_t n = 181; n < hi; n *= 2) lens.insert(L.quiet(n));
  lens.insert(L.quiet(hi));
  std::vector<double> xs, ratio, rel;
  std::vector<measured> pts;
  for (std::int64_t s : lens) {
    attention_case c = family(base, L, s, input_dist::m_diffuse);
    if (!L.decode) c.queries = std::min<std::int64_t>(s, 256);  // the sums run along keys: few queries suffice
    pts.push_back(r.run(k, c, fmt::format("near-uniform attention over S={} keys", s)));
    const auto& m = pts.back();
    if (m.ran && !m.error && !m.nonfinite()) {
      xs.push_back(static_cast<double>(s));
      ratio.push_back(m.step.ratio_to_naive);
      rel.push_back(m.step.rel_rms);
    }
  }
  // Growth with length: the longest length breaks the bound, and the error rose at least 4x from
  // the shortest along a positive log-log slope. Rounding error of a correctly held state does
  // not grow with S (NUMERICS.md), and a healthy kernel's ratio stays within ~2x of the baseline
  // at every length, so a 4x rise is growth, not noise.
  const metrics::growth_fit g = metrics::fit_growth(xs, ratio);
  const measured& longest = pts.back();
  const measured& shortest = pts.front();
  const bool comparable = shortest.ran && !shortest.error && !shortest.nonfinite() && longest.ran && !longest.error &&
                          !longest.nonfinite();
  const double rise_ratio = comparable && shortest.step.ratio_to_naive > 0
                                ? longest.step.ratio_to_naive / shortest.step.ratio_to_naive : 0.0;
  const double rise_rel = comparable && shortest.step.rel_rms > 0 ? longest.step.rel_rms / shortest.step.rel_rms : 0.0;
  // Or a steady slope: >= 0.25 and 3 standard errors above 0 with at least a 2x rise (healthy
  // kernels' ratio slopes stay under 0.04 over 224 sweeps, docs/measurements/growth_false_alarms).
  const double rise = std::max(rise_ratio, rise_rel);
  const bool steady = std::isfinite(g.slope) && g.slope >= 0.25 && g.slope - 3.0 * g.slope_stderr > 0 && rise >= 2.0;
  const bool grows = (rise >= 4.0 && std::isfinite(g.slope) && g.slope > 0) || steady;
  const bool fail = comparable && longest.failed() && grows;
  k.evidence.push_back(fmt::format("diffuse rows S={}..{}: ratio_to_naive {:.3g} -> {:.3g} (x{:.3g}), rel_rms x{:.3g}, "
                                   "log-log ratio slope {:.2f} +- {:.2f} over {} lengths: {}", *lens.begin(),
                                   *lens.rbegin(), shortest.step.ratio_to_naive, longest.step.ratio_to_naive, rise_ratio,
                                   rise_rel, g.slope, g.slope_stderr, xs.size(),
                                   grows ? "the error grows with length" : "no growth with length"));
  k.evidence.push_back(fmt::format("longest: {}; shortest (control): {}", r.describe(longest), r.describe(shortest)));
  if (fail && r.ctx().state_knobs()) {
    attention_case c = family(base, L, longest.step.seq, input_dist::m_diffuse);
    c.queries = std::min<std::int64_t>(c.seq, 256);
    const auto po = with_states_f64(r.default_po(), {"l", "o", "s", "p", "m"});
    const auto up = r.run(k, c, "disabled: running state (s, p, m, l, o) held in f64", &po);
    k.evidence.push_back(fmt::format("with the running state in f64: {}", r.describe(up)));
  }
  verdict(k, fail);
  return k;
}

// --- index or dispatch threshold ------------------------------------------------------------
audit_class index_threshold(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"index or dispatch threshold", "pass", {}, {}, {}};
  auto at = [&](std::int64_t s, const std::string& what) {
    // Causal, bottom-right: the last 16 queries sit at positions S - 16 .. S - 1 and see nearly
    // every key, so both a wrapped key offset and a wrapped position in the mask show.
    attention_case c = family(base, L, s, input_dist::m_normal, mask_kind::m_causal);
    if (!L.decode) c.queries = 16;
    return r.run(k, c, what);
  };
  const auto below = at((1 << 15) - 1, "control: S = 2^15 - 1");
  std::vector<measured> above{at((1 << 15) + 256, "S = 2^15 + 256 (a 16-bit key index wraps)"),
                              at(49152, "S = 49152 (past 2^15, a multiple of most common tiles)")};
  if (!L.quick) {
    above.push_back(at((1 << 16) + 256, "S = 2^16 + 256"));
    above.push_back(at((1 << 17) + 256, "S = 2^17 + 256 (128K)"));
  }
  // A step, not a drift: past the threshold the error is 10x the control's (an accumulation
  // error grows by a few percent between 2^15 - 1 and 2^15 + 256).
  auto steps = [&](const measured& a) {
    return contrast(a, below) && (a.nonfinite() || a.step.rel_rms >= 10.0 * below.step.rel_rms);
  };
  std::size_t fails = 0;
  for (const auto& a : above) fails += steps(a) ? 1 : 0;
  const bool fail = fails >= 2;
  for (const auto& a : above)
    k.evidence.push_back(fmt::format("{}{}", r.describe(a),
                                     steps(a) ? fmt::format(" (step {} over the control)",
                                                            factor_text(a.step.rel_rms, below.step.rel_rms))
                                              : ""));
  k.evidence.push_back(fmt::format("below the threshold (control): {}", r.describe(below)));
  verdict(k, fail);
  return k;
}

// --- mask geometry --------------------------------------------------------------------------
audit_class mask_geometry(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"mask geometry", "pass", {}, {}, {}};
  const std::int64_t s = L.quiet(1024);
  const std::int64_t b = L.tile_or(64);
  std::vector<measured> probes;
  measured control;
  if (L.decode) {
    control = r.run(k, family(base, L, s, input_dist::m_normal), "control: decode without a mask");
    attention_case c = family(base, L, s, input_dist::m_normal, mask_kind::m_causal);
    c.queries = 8;
    probes.push_back(r.run(k, c, "T=8 new queries, causal bottom-right"));
  } else {
    control = r.run(k, family(base, L, s, input_dist::m_normal, mask_kind::m_causal), "control: causal, T = S");
    for (std::int64_t t : {std::int64_t{3}, s / 2 + 1}) {
      attention_case c = family(base, L, s, input_dist::m_normal, mask_kind::m_causal);
      c.queries = t;
      probes.push_back(r.run(k, c, fmt::format("causal with T={} != S={} (bottom-right alignment)", t, s)));
    }
    for (std::int64_t w : {b - 1, b, b + 1}) {
      attention_case c = family(base, L, s, input_dist::m_normal, mask_kind::m_window);
      c.window = w;
      probes.push_back(r.run(k, c, fmt::format("sliding window W={} (edge keys)", w)));
    }
  }
  bool fail = false;
  for (const auto& p : probes) {
    if (p.nonfinite()) continue;  // NaN at masked keys belongs to the empty-row class
    // Strict: the T = S causal control must hold. A mask bug cannot break it; when it breaks,
    // another bug is at work and the mask probes cannot be told from it.
    if (p.failed() && control.passed()) {
      fail = true;
      k.evidence.push_back(fmt::format("{} against {}", r.describe(p), r.describe(control)));
    }
  }
  if (!fail)
    k.evidence.push_back(fmt::format("{} mask probes hold as the control does: {}", probes.size(), r.describe(control)));
  verdict(k, fail);
  return k;
}

// --- paged or tail tile ---------------------------------------------------------------------
// The smallest B whose multiples all pass while the lengths around them (k*B-1, k*B+1) fail, or
// the reverse; 0 when the failures follow no tile.
std::int64_t tail_pattern(const std::map<std::int64_t, bool>& failed, std::int64_t known_tile, std::string& pattern) {
  for (std::int64_t b = known_tile > 0 ? known_tile : 8; b <= (known_tile > 0 ? known_tile : 512); b += 8) {
    int mult_pass = 0, mult_fail = 0, near_fail = 0, near_pass = 0, other_fail = 0;
    for (const auto& [s, f] : failed) {
      const bool mult = s % b == 0;
      const bool near = (s + 1) % b == 0 || (s - 1) % b == 0;
      if (mult) (f ? mult_fail : mult_pass)++;
      else if (near) (f ? near_fail : near_pass)++;
      else if (f) other_fail++;
    }
    if (mult_pass >= 2 && mult_fail == 0 && near_fail >= 2) {
      pattern = "non-multiples";
      return b;
    }
    if (mult_fail >= 2 && mult_pass == 0 && near_pass >= 2 && near_fail == 0 && other_fail == 0) {
      pattern = "multiples";
      return b;
    }
  }
  return 0;
}

audit_class tail_tile(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"paged or tail tile", "pass", {}, {}, {}};
  std::set<std::int64_t> lens;
  const std::vector<std::int64_t> ks = L.quick ? std::vector<std::int64_t>{1, 2, 5} : std::vector<std::int64_t>{1, 2, 3, 5, 9};
  if (L.tile_k > 0) {
    for (std::int64_t m : ks)
      for (std::int64_t d : {-1, 0, 1}) lens.insert(m * L.tile_k + d);
  } else {
    for (std::int64_t b : k_common_tiles)
      for (std::int64_t m : (L.quick ? std::vector<std::int64_t>{2} : std::vector<std::int64_t>{2, 3}))
        for (std::int64_t d : {-1, 0, 1}) lens.insert(m * b + d);
  }
  std::map<std::int64_t, bool> failed;
  std::vector<measured> pts;
  for (std::int64_t s : lens) {
    if (s < 1) continue;
    pts.push_back(r.run(k, family(base, L, s, input_dist::m_normal), fmt::format("S={} (k*B-1, k*B, k*B+1)", s)));
    if (pts.back().ran && !pts.back().error) failed[s] = pts.back().failed();
  }
  std::string pattern;
  // A known (or inferred) tile is the only candidate: lengths laid out around its multiples
  // cannot tell it from its divisors.
  const std::int64_t b = tail_pattern(failed, L.tile_k, pattern);
  std::size_t n_fail = 0;
  for (const auto& [s, f] : failed) n_fail += f;
  const bool fail = b > 0;
  if (fail) {
    std::string list;
    for (const auto& [s, f] : failed)
      if (f && list.size() < 80) list += fmt::format("{}{}", list.empty() ? "" : ",", s);
    k.evidence.push_back(fmt::format("failures at the {} of B={} only ({} of {} lengths fail: {}); every {} of {} passes",
                                     pattern, b, n_fail, failed.size(), list,
                                     pattern == "non-multiples" ? "multiple" : "non-multiple", b));
    for (const auto& p : pts)
      if (p.failed()) {
        k.evidence.push_back(fmt::format("first failing: {}", r.describe(p)));
        break;
      }
    for (const auto& p : pts)
      if (p.passed() && p.step.seq % b == (pattern == "non-multiples" ? 0 : 1)) {
        k.evidence.push_back(fmt::format("contrast: {}", r.describe(p)));
        break;
      }
  } else {
    k.evidence.push_back(n_fail == 0
                             ? fmt::format("all {} lengths around {} pass", failed.size(),
                                           L.tile_k > 0 ? fmt::format("multiples of B={}", L.tile_k)
                                                        : std::string("multiples of every common tile"))
                             : fmt::format("{} of {} lengths fail, but not on a tile pattern (not this class)", n_fail,
                                           failed.size()));
  }
  verdict(k, fail);
  return k;
}

// --- GQA mapping ----------------------------------------------------------------------------
audit_class gqa_mapping(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"GQA mapping", "pass", {}, {}, {}};
  const std::int64_t s = L.quiet(256);
  auto at = [&](std::int64_t hq, std::int64_t hkv) {
    attention_case c = family(base, L, s, input_dist::m_constant_v);
    c.heads = hq;
    c.kv_heads = hkv;
    return r.run(k, c, fmt::format("a distinct constant V per KV head, Hq={}, Hkv={} (group {})", hq, hkv, hq / hkv));
  };
  const auto g1 = at(4, 4);
  const std::vector<measured> grouped{at(8, 2), at(14, 2)};
  bool fail = false;
  for (const auto& g : grouped)
    if (contrast(g, g1)) {
      fail = true;
      k.evidence.push_back(fmt::format("{} against group 1 {}", r.describe(g), r.describe(g1)));
    }
  if (!fail)
    k.evidence.push_back(fmt::format("groups 1, 4 and 7 hold: {}; {}", r.describe(g1), r.describe(grouped.front())));
  verdict(k, fail);
  return k;
}

// --- fp8 scaling ----------------------------------------------------------------------------
// Numerator-only loss: quantizing P for P.V while l sums the unquantized P. Probed with an
// attention sink (dist=sink): every key but the first sits at P ~ 1e-4 of the running max,
// below e4m3's smallest subnormal 2^-9, and holds ~45% of the mass at S = 8192; V has mean 1, so
// O ~ 1 whatever the weights. A loss from the numerator alone biases O low while the LSE (from
// l) stays exact; a running sum held short biases O too, but moves the LSE with it.
constexpr double k_bias_limit = 0.05;      // |bias| of a correctly normalized kernel: a few
                                           // roundings of V (<< 5%)
constexpr double k_lse_exact_nats = 0.05;  // LSE error of a kernel with an exact l: fp32 l,
                                           // bf16-written LSE at |lse| ~ 5 (spacing 0.03)

bool numerator_only(const measured& m) {
  return m.ran && !m.error && !m.nonfinite() && m.step.bias <= -k_bias_limit &&
         !(m.step.lse_max_abs > k_lse_exact_nats);  // unknown LSE (inf) does not count against
}

std::string bias_text(const measured& m) {
  if (!m.ran || m.error) return "no measurement";
  const bool lse_known = std::isfinite(m.step.lse_max_abs);
  return fmt::format("signed bias of O {:+.3g}, LSE max error {} ({})", m.step.bias,
                     lse_known ? fmt::format("{:.3g} nats", m.step.lse_max_abs) : std::string("unknown (no LSE)"),
                     numerator_only(m) ? (lse_known ? "mass lost from the numerator only: O low, LSE exact"
                                                    : "O biased low; without an LSE the numerator cannot be told "
                                                      "from l")
                                       : "no numerator-only loss");
}

audit_class fp8_scaling(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"fp8 scaling", "pass", {}, {}, {}};
  const auto& po = r.ctx().base_provider();
  const std::int64_t s = L.quiet(L.quick ? 4096 : std::max<std::int64_t>(4096, std::min<std::int64_t>(L.seq_hi, 8192)));
  attention_case c = family(base, L, s, input_dist::m_sink);
  if (!L.decode) c.queries = 64;
  const auto sink = r.run(k, c, fmt::format("attention sink: {} keys at P ~ 1e-4 of the max, V of mean 1", s - 1), &po);
  bool fail = numerator_only(sink);
  k.evidence.push_back(fmt::format("{}; {}", r.describe(sink), bias_text(sink)));
  if (!active_fp8_points(po).empty()) {
    // The configured fp8 points (emu knobs): their error must stay within the format's own
    // rounding (the audit's bound for fp8 cases), else restore them one at a time, as bisect does.
    const auto plain = r.run(k, family(base, L, L.quiet(1024), input_dist::m_normal), "the configured fp8 points, N(0,1)", &po);
    if (plain.failed()) {
      probe_outcome b;
      b.ran = true;
      b.failed = true;
      b.error = plain.step.gate_value;
      b.rel_rms = plain.step.rel_rms;
      b.ratio = plain.step.ratio_to_naive;
      b.nan = plain.step.nan_count;
      b.step = static_cast<std::size_t>(plain.step.index);
      const auto x = separate_fp8_points(r.ctx(), family(base, L, L.quiet(1024), input_dist::m_normal), b);
      bool named = false;
      for (const auto& p : x.culprit) named = named || p != "acc";
      if (named && x.verdict != "ambiguous") fail = true;
      k.evidence.push_back(fmt::format("{}; restoring the points: {} ({})", r.describe(plain), x.verdict, x.text));
    } else {
      k.evidence.push_back(fmt::format("the fp8 points stay within the format's rounding: {}", r.describe(plain)));
    }
  } else if (!fail) {
    k.evidence.push_back("no fp8 point configured (--kv-format, --p-format): the sink probe checks for P quantized "
                         "inside the kernel");
  }
  verdict(k, fail);
  return k;
}

// --- wavefront width ------------------------------------------------------------------------
audit_class wavefront(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"wavefront width", "pass", {}, {}, {}};
  // Rows of 33-65 keys need the upper half of a 64-wide reduction tree; rows of at most 32 do
  // not. Flat logits (one key repeated) make attention exactly uniform and keep the running max
  // still, so no rescale bug can pass for this class, and a half-wavefront sum is off by 2x.
  std::vector<measured> lo, hi;
  for (std::int64_t s : {16, 24, 32})
    lo.push_back(r.run(k, family(base, L, s, input_dist::m_flat), fmt::format("control: S={} <= 32 keys, flat logits", s)));
  for (std::int64_t s : {33, 40, 48, 56, 63, 64, 65})
    hi.push_back(r.run(k, family(base, L, s, input_dist::m_flat), fmt::format("S={} keys: 33..65 lanes, flat logits", s)));
  bool lo_pass = true, hi_fail = true;
  for (const auto& m : lo) lo_pass = lo_pass && m.passed();
  for (const auto& m : hi) hi_fail = hi_fail && m.failed() && !m.nonfinite();
  const bool fail = lo_pass && hi_fail;
  if (fail)
    k.evidence.push_back(fmt::format("every row of 33..65 keys fails (S=64 too: not a tail tile) while rows of <= 32 keys "
                                     "hold: {} against {}", r.describe(hi[5]), r.describe(lo.back())));
  else
    k.evidence.push_back(fmt::format("rows of 33..65 keys: {}; rows of <= 32: {}", r.describe(hi[5]), r.describe(lo.back())));
  verdict(k, fail);
  return k;
}

}  // namespace

std::vector<audit_class> run_audit_classes(bisect_context& ctx, const attention_case& base, std::int64_t seq_hi,
                                           bool quick, std::int64_t tile_q, std::int64_t tile_k,
                                           std::vector<audit_error>& errors) {
  const auto& under_test = ctx.base_provider();
  const auto fp8_points = active_fp8_points(under_test);
  runner r(ctx, errors, fp8_points.empty() ? under_test : restore_fp8_points(under_test, fp8_points));
  layout L;
  L.tile_q = tile_q;
  L.tile_k = tile_k;
  L.quick = quick;
  L.decode = ctx.decode();
  L.seq_hi = seq_hi;
  L.decode_queries = std::clamp<std::int64_t>(base.queries, 1, 8);
  std::vector<audit_class> out;
  out.push_back(empty_split(r, base, L));
  out.push_back(finite_sentinel(r, base, L));
  out.push_back(rescale_frame(r, base, L));
  out.push_back(accumulation(r, base, L));
  out.push_back(index_threshold(r, base, L));
  out.push_back(mask_geometry(r, base, L));
  out.push_back(tail_tile(r, base, L));
  out.push_back(gqa_mapping(r, base, L));
  out.push_back(fp8_scaling(r, base, L));
  out.push_back({"sub-byte formats", "not-applicable",
                 {"attention kernels take no sub-byte (fp4/fp6/int4) inputs here; audit quantizers with `numprobe quant`"},
                 {}, {}});
  out.push_back(wavefront(r, base, L));
  return out;
}

std::vector<std::string> failing_classes(const std::vector<audit_class>& classes) {
  std::vector<std::string> out;
  for (const auto& c : classes)
    if (c.verdict == "fail") out.push_back(c.name);
  return out;
}

}  // namespace numprobe::probes
