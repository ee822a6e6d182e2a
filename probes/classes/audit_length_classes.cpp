// The audit's length-driven classes (see audit_kit.hpp): low-precision accumulation, index or
// dispatch threshold, paged or tail tile.
#include "probes/classes/audit_kit.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <set>
#include <vector>

#include "numprobe/metrics/growth_fit.hpp"

namespace numprobe::probes::audit_kit {

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
  // A slope needs 3 lengths: with an unknown tile the quiet lengths are multiples of 768, and a
  // short --seq leaves 2 of them; extend by doublings.
  while (lens.size() < 3) lens.insert(L.quiet(*lens.rbegin() * 2));
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
  // A slope needs 3 measured lengths; with fewer, say so rather than print "nan +- nan".
  const std::string slope = std::isfinite(g.slope)
                                ? fmt::format("log-log ratio slope {:.2f} +- {:.2f} over {} lengths", g.slope,
                                              g.slope_stderr, xs.size())
                                : fmt::format("no slope ({} measured length{}, 3 needed)", xs.size(),
                                              xs.size() == 1 ? "" : "s");
  k.evidence.push_back(fmt::format("diffuse rows S={}..{}: ratio_to_naive {:.3g} -> {:.3g} (x{:.3g}), rel_rms x{:.3g}, "
                                   "{}: {}", *lens.begin(), *lens.rbegin(), shortest.step.ratio_to_naive,
                                   longest.step.ratio_to_naive, rise_ratio, rise_rel, slope,
                                   !comparable ? "not judged (the shortest or longest did not run)"
                                   : grows     ? "the error grows with length"
                                               : "no growth with length"));
  k.evidence.push_back(fmt::format("longest: {}; shortest (control): {}", r.describe(longest), r.describe(shortest)));
  if (fail && r.ctx().state_knobs()) {
    attention_case c = family(base, L, longest.step.seq, input_dist::m_diffuse);
    c.queries = std::min<std::int64_t>(c.seq, 256);
    const auto po = with_states_f64(r.default_po(), {"l", "o", "s", "p", "m"});
    const auto up = r.run(k, c, "disabled: running state (s, p, m, l, o) held in f64", &po);
    k.evidence.push_back(fmt::format("with the running state in f64: {}", r.describe(up)));
  }
  verdict(k, fail, comparable);
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
  bool judged = false;
  for (const auto& a : above) judged = judged || (a.ok() && below.passed());
  for (const auto& a : above)
    k.evidence.push_back(fmt::format("{}{}", r.describe(a),
                                     steps(a) ? fmt::format(" (step {} over the control)",
                                                            factor_text(a.step.rel_rms, below.step.rel_rms))
                                              : ""));
  k.evidence.push_back(fmt::format("below the threshold (control): {}", r.describe(below)));
  verdict(k, fail, judged);
  return k;
}


// --- paged or tail tile ---------------------------------------------------------------------
// The smallest B whose multiples all pass while every length off them fails ("non-multiples":
// a partial tail tile), or only the lengths one past them (k*B+1) fail ("one-past-multiples": a
// tail of one key), or the reverse ("multiples"); 0 when the failures follow no tile. A passing
// non-multiple rules a B out: a tail bug at S = 64k+1 is not "non-multiples of B=8" when S = 33
// and S = 63 pass.
std::int64_t tail_pattern(const std::map<std::int64_t, bool>& failed, std::int64_t known_tile, std::string& pattern) {
  for (std::int64_t b = known_tile > 0 ? known_tile : 8; b <= (known_tile > 0 ? known_tile : 512); b += 8) {
    int mult_pass = 0, mult_fail = 0, near_fail = 0, near_pass = 0, other_fail = 0, other_pass = 0;
    int plus_fail = 0, plus_pass = 0, minus_pass = 0;
    for (const auto& [s, f] : failed) {
      const bool mult = s % b == 0;
      const bool plus = (s - 1) % b == 0, minus = (s + 1) % b == 0;
      if (mult) (f ? mult_fail : mult_pass)++;
      else if (plus || minus) (f ? near_fail : near_pass)++;
      else (f ? other_fail : other_pass)++;
      if (!mult && plus) (f ? plus_fail : plus_pass)++;
      if (!mult && minus && !f) minus_pass++;
    }
    if (mult_pass >= 2 && mult_fail == 0 && near_fail >= 2 && near_pass == 0 && other_pass == 0) {
      pattern = "non-multiples";
      return b;
    }
    if (mult_pass >= 2 && mult_fail == 0 && plus_fail >= 2 && plus_pass == 0 && minus_pass >= 1 && other_fail == 0) {
      pattern = "one-past-multiples";
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
    const std::string where = pattern == "non-multiples"        ? fmt::format("every length off a multiple of B={}", b)
                              : pattern == "one-past-multiples" ? fmt::format("the lengths k*B+1 of B={} only", b)
                                                                : fmt::format("the multiples of B={} only", b);
    const std::string holds = pattern == "multiples" ? fmt::format("every non-multiple of {} passes", b)
                              : pattern == "one-past-multiples"
                                  ? fmt::format("every multiple of {} and every k*B-1 passes", b)
                                  : fmt::format("every multiple of {} passes", b);
    k.evidence.push_back(fmt::format("failures at {} ({} of {} lengths fail: {}); {}", where, n_fail, failed.size(),
                                     list, holds));
    for (const auto& p : pts)
      if (p.failed()) {
        k.evidence.push_back(fmt::format("first failing: {}", r.describe(p)));
        break;
      }
    for (const auto& p : pts)
      if (p.passed() && (pattern == "multiples" ? p.step.seq % b != 0 : p.step.seq % b == 0)) {
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
  // Judged on at least a multiple and its two neighbours (the pattern needs both kinds).
  verdict(k, fail, failed.size() >= 3);
  return k;
}

}  // namespace numprobe::probes::audit_kit
