#include "probes/tiles/tile_inference.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <set>

#include "numprobe/base/error.hpp"
#include "probes/point/attention_probe.hpp"
#include "probes/classes/bisect_families.hpp"

namespace numprobe::probes {
namespace {

// Causal row-profile lengths, chosen by an exhaustive check over the candidate pairs: for every
// two candidates B1 != B2 in [8, 256], at least two of these lengths put the partial last tile
// floor(S/B)*B at different rows (or leave it out for one of them), so the tail model never
// confuses B with B/2, 2B or any other candidate; every residue S mod B is 0 or >= 3, so the
// tail spans at least three rows. All stay below 800 keys: a profile costs O(S^2 D) once.
constexpr std::int64_t k_profile_lengths[] = {531, 621, 668, 766};

// A step in a row profile must exceed this factor in error (log 3) and 6 robust standard
// deviations of the row-to-row change: rounding noise of one row's error (D elements) moves it
// by about 15% (bf16 output), so chance steps of x3 do not occur in healthy profiles.
constexpr double k_min_step = 1.0986;  // log(3)
constexpr double k_noise_sigmas = 6.0;
// Length-sweep clusters: the failing lengths must sit a factor 4 above the passing ones.
constexpr double k_min_gap = 1.386;  // log(4)
constexpr std::int64_t k_sweep_queries = 8;
// Sliding-window profiles: a row at position t sees keys (t - W, t], so the key tiles it spans
// change at t = k*B (a tile enters) and at t - W + 1 = k*B (one leaves). W - 1 = 12 and 76 are 4
// or more rows away from every multiple of every candidate, so the two edges never merge. The
// short window makes rows alternate between one and two tiles (a fault of the second tile steps
// on and off); the long one between two or three and more (a fault from the third tile).
constexpr std::int64_t k_windows[] = {13, 77};
constexpr std::int64_t k_window_lengths[] = {621, 766};

attention_case probe_case(const attention_case& base, std::int64_t s, input_dist d, mask_kind m,
                          std::int64_t queries) {
  return plain_case(base, s, queries, d, m);
}

// Runs one case on every row; the per-row error (max over heads), or nothing on a backend error.
std::optional<std::vector<double>> row_errors(attention_provider& p, const attention_case& c,
                                              tile_inference& out) {
  attention_probe_options po;
  po.sampling.max_rows = 0;
  po.end_to_end = false;
  po.worst = 0;
  out.cases.push_back(c.id());
  attention_point pt;
  try {
    pt = run_attention_point(p, c, po);
  } catch (const error& e) {
    out.errors.push_back(fmt::format("{}: {}", c.id(), e.what()));
    return std::nullopt;
  }
  std::vector<double> e(static_cast<std::size_t>(c.t()), 0.0);
  for (const auto& r : pt.kernel.per_row) {
    const double v = std::isfinite(r.rel_rms) ? r.rel_rms : 1e6;  // NaN/Inf rows: the worst
    auto& slot = e[static_cast<std::size_t>(r.row % c.t())];
    slot = std::max(slot, v);
  }
  return e;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Rows where the error steps and stays stepped: |y(t) - y(t-1)| above the threshold, and the
// mean of the next w rows differs from the mean of the previous w rows the same way.
std::vector<std::int64_t> step_rows(const std::vector<double>& err, double floor_value,
                                    std::int64_t merge_rows = 6, std::int64_t first_row = 4) {
  const auto n = static_cast<std::int64_t>(err.size());
  std::vector<double> y(err.size());
  for (std::size_t i = 0; i < err.size(); ++i) y[i] = std::log(std::clamp(err[i], floor_value, 1e6));
  std::vector<double> d;
  for (std::int64_t t = 1; t < n; ++t) d.push_back(y[t] - y[t - 1]);
  if (d.empty()) return {};
  const double med = median(d);
  std::vector<double> dev;
  for (double x : d) dev.push_back(std::fabs(x - med));
  const double sigma = 1.4826 * median(dev);
  const double thr = std::max(k_min_step, k_noise_sigmas * sigma);
  constexpr std::int64_t w = 4;
  std::vector<std::int64_t> out;
  // Rows below 4 are left out: row 0 sees one key (its output is V rounded, nearly exact), so
  // the first rows step for reasons no tile explains; the smallest candidate tile is 8.
  for (std::int64_t t = first_row; t < n; ++t) {
    const double step = y[t] - y[t - 1];
    if (std::fabs(step) < thr) continue;
    double before = 0, after = 0;
    std::int64_t nb = 0, na = 0;
    for (std::int64_t i = std::max<std::int64_t>(0, t - w); i < t; ++i) before += y[i], ++nb;
    for (std::int64_t i = t; i < std::min(n, t + w); ++i) after += y[i], ++na;
    const double persistent = after / na - before / nb;
    if (persistent * step <= 0 || std::fabs(persistent) < thr / 2) continue;
    // One event may take a few rows to settle (the error keeps rising over the first rows of
    // a new tile): steps within merge_rows (6 < 8, the smallest candidate period) of the last
    // one belong to it.
    if (!out.empty() && out.back() >= t - merge_rows) continue;
    out.push_back(t);
  }
  return out;
}

// F1 agreement of predicted and observed row sets, a prediction matching an observation within
// one row (conventions differ on whether a tile begins at row k*B or k*B +- 1).
tile_candidate_score agreement(std::int64_t k, const std::string& model,
                               const std::vector<std::vector<std::int64_t>>& predicted,
                               const std::vector<std::vector<std::int64_t>>& observed) {
  tile_candidate_score s;
  s.k = k;
  s.model = model;
  std::int64_t matched_obs = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    const auto& p = predicted[i];
    const auto& o = observed[i];
    s.predicted += static_cast<std::int64_t>(p.size());
    s.observed += static_cast<std::int64_t>(o.size());
    auto near = [](const std::vector<std::int64_t>& set, std::int64_t x) {
      return std::any_of(set.begin(), set.end(), [&](std::int64_t y) { return std::llabs(x - y) <= 1; });
    };
    for (auto x : p) s.matched += near(o, x);
    for (auto x : o) matched_obs += near(p, x);
  }
  if (s.predicted == 0 || s.observed == 0) return s;
  const double precision = static_cast<double>(s.matched) / static_cast<double>(s.predicted);
  const double recall = static_cast<double>(matched_obs) / static_cast<double>(s.observed);
  s.score = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
  return s;
}

// Picks the best candidate and the best one with another k; sets confidence from the F1, the
// number of matched events and the margin over the runner-up.
bool decide(const std::vector<tile_candidate_score>& scores, const std::string& signal,
            const std::string& what, tile_inference& out) {
  if (scores.empty()) return false;
  tile_candidate_score best;
  for (const auto& s : scores)
    if (s.score > best.score || (s.score == best.score && s.k < best.k && s.score > 0)) best = s;
  tile_candidate_score second;
  for (const auto& s : scores)
    if (s.k != best.k && s.score > second.score) second = s;
  const double margin = best.score - second.score;
  std::string conf = "unknown";
  if (best.score >= 0.9 && best.matched >= 3 && margin >= 0.25) conf = "high";
  else if (best.score >= 0.75 && best.matched >= 2 && margin >= 0.15) conf = "medium";
  const std::string numbers = fmt::format(
      "{}: best B={} ({}, {} {:.2f}, {} matched of {} predicted, {} observed), second B={} ({}, {:.2f})",
      what, best.k, best.model, best.metric, best.score, best.matched, best.predicted, best.observed,
      second.k, second.model, second.score);
  // Keep the strongest evidence seen so far, even when it is not conclusive.
  if (conf == "unknown" && out.best.score >= best.score && !out.evidence.empty()) return false;
  out.best = best;
  out.second = second;
  out.evidence = numbers;
  if (conf == "unknown") return false;
  out.k = best.k;
  out.confidence = conf;
  out.signal = signal;
  return conf == "high";
}

bool from_window_profiles(attention_provider& p, const attention_case& base, input_dist dist,
                          tile_inference& out, std::vector<tile_candidate_score>* scores_out);

// Stage 1: causal row profiles under one input family.
bool from_row_profiles(attention_provider& p, const attention_case& base, input_dist dist,
                       tile_inference& out) {
  std::vector<std::vector<std::int64_t>> observed;
  std::vector<std::int64_t> lengths;
  for (std::int64_t s : k_profile_lengths) {
    const attention_case c = probe_case(base, s, dist, mask_kind::m_causal, 0);
    const auto e = row_errors(p, c, out);
    if (!e) return false;  // the kernel does not take this case: no profiles from it
    const double floor_value = 1e-3 * formats::unit_roundoff(c.dtype);
    observed.push_back(step_rows(*e, floor_value));
    lengths.push_back(s);
    if (std::find(out.profile_lengths.begin(), out.profile_lengths.end(), s) == out.profile_lengths.end())
      out.profile_lengths.push_back(s);
    for (auto t : observed.back()) out.event_rows.push_back(t);
  }
  std::int64_t events = 0;
  for (const auto& o : observed) events += static_cast<std::int64_t>(o.size());
  if (events == 0) {
    if (out.evidence.empty())
      out.evidence = fmt::format("causal row profiles (dist={}, S={}..{}): no step in the per-row error",
                                 to_string(dist), lengths.front(), lengths.back());
    return false;
  }
  std::vector<tile_candidate_score> scores;
  for (std::int64_t b : tile_candidates()) {
    std::vector<std::vector<std::int64_t>> tail, periodic;
    for (std::int64_t s : lengths) {
      tail.push_back(s % b ? std::vector<std::int64_t>{s / b * b} : std::vector<std::int64_t>{});
      std::vector<std::int64_t> every;
      for (std::int64_t r = b; r < s; r += b) every.push_back(r);
      periodic.push_back(every);
    }
    // The first-tile model: the error is that of a one-tile kernel until the second key tile
    // begins (a rescale or merge fault: later tiles change the error smoothly, without a step).
    std::vector<std::vector<std::int64_t>> first(lengths.size(), std::vector<std::int64_t>{b});
    scores.push_back(agreement(b, "tail", tail, observed));
    scores.push_back(agreement(b, "periodic", periodic, observed));
    scores.push_back(agreement(b, "first tile", first, observed));
  }
  const bool high = decide(scores, fmt::format("causal row profiles, dist={}", to_string(dist)),
                           fmt::format("causal row profiles (dist={}, S={}, {} error steps)", to_string(dist),
                                       fmt::join(lengths, ","), events),
                           out);
  if (!out.known() || out.best.model != "first tile") return high;
  // A first step alone: confirm against the window profiles, or withdraw the answer.
  const std::int64_t first = out.k;
  std::vector<tile_candidate_score> window_scores;
  if (from_window_profiles(p, base, dist, out, &window_scores)) {
    if (out.k != first) out.evidence += fmt::format(" (the first step at row {} is a later tile's)", first);
    return out.confidence == "high";
  }
  // Not decisive alone: the candidates the first step allows are B and its divisors (a fault
  // from a later tile); the window profiles choose among them when one scores clearly best.
  tile_candidate_score top, next;
  for (const auto& w : window_scores) {
    if (first % w.k != 0) continue;
    if (w.score > top.score) {
      next = top;
      top = w;
    } else if (w.score > next.score) {
      next = w;
    }
  }
  if (top.score >= 0.2 && top.score >= 1.25 * next.score && top.matched >= 4) {
    out.k = top.k;
    out.confidence = "medium";
    out.signal = "causal first step + window edges";
    out.evidence += fmt::format("; of B={} and its divisors the window edges favour B={} ({:.2f} vs B={} {:.2f})",
                                first, top.k, top.score, next.k, next.score);
    return true;
  }
  out.k = 0;
  out.confidence = "unknown";
  out.signal = "none";
  out.evidence += fmt::format("; the first error step at row {} alone cannot tell B={} from a fault that "
                              "starts at a later tile of a divisor of it", first, first);
  return true;  // nothing further would decide it: stop here, unknown
}

// A first-tile answer from causal profiles cannot tell B from a fault that starts at a later
// tile of B/2 or B/3 (stale-max starts at the third tile): every causal row starts at key 0.
// Sliding windows move the tile grid against each row's first key, so the rows whose span
// changes follow the true B. Returns whether the window profiles confirmed a tile.
bool from_window_profiles(attention_provider& p, const attention_case& base, input_dist dist,
                          tile_inference& out, std::vector<tile_candidate_score>* scores_out) {
  std::vector<std::vector<std::int64_t>> observed;
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;  // (S, W)
  for (std::int64_t win : k_windows)
    for (std::int64_t s : k_window_lengths) {
      attention_case c = probe_case(base, s, dist, mask_kind::m_window, 0);
      c.window = win;
      const auto e = row_errors(p, c, out);
      if (!e) return false;
      // Rows below W + 4 see a prefix (their window is cut at key 0): left to the causal profiles.
      observed.push_back(step_rows(*e, 1e-3 * formats::unit_roundoff(c.dtype), 2, win + 4));
      runs.emplace_back(s, win);
      for (auto t : observed.back()) out.event_rows.push_back(t);
    }
  std::vector<tile_candidate_score> scores;
  for (std::int64_t b : tile_candidates()) {
    std::vector<std::vector<std::int64_t>> edges;
    for (const auto& [s, win] : runs) {
      std::vector<std::int64_t> rows;
      for (std::int64_t t = win + 4; t < s; ++t)
        if (t % b == 0 || (t - win + 1) % b == 0) rows.push_back(t);
      edges.push_back(rows);
    }
    scores.push_back(agreement(b, "window edges", edges, observed));
  }
  if (scores_out) *scores_out = scores;
  tile_inference w = out;
  w.k = 0;
  w.evidence.clear();
  w.best = {};
  const bool high = decide(scores, fmt::format("sliding-window row profiles, dist={}", to_string(dist)),
                           fmt::format("window row profiles (W={}, dist={}, S={})", fmt::join(k_windows, ","),
                                       to_string(dist), fmt::join(k_window_lengths, ",")),
                           w);
  const std::string causal = out.evidence;
  w.evidence = causal + "; " + w.evidence;
  out = w;
  return high || out.known();
}

// Stage 2: pass/fail against S mod B at lengths 2B, 5B/2 and 3B of every candidate, T = 8
// queries, no mask. Failing lengths are the upper cluster of log(ratio to naive) when a gap of
// a factor 4 separates it from the rest.
bool from_length_sweep(attention_provider& p, const attention_case& base, tile_inference& out) {
  std::set<std::int64_t> ls;
  for (std::int64_t b : tile_candidates())
    // 5B/2 + 1 is odd, a multiple of no candidate: it fails with every tail fault.
    for (std::int64_t s : {2 * b, 5 * b / 2 + 1, 3 * b}) ls.insert(s);
  std::vector<std::int64_t> lengths;
  std::vector<double> y;
  for (std::int64_t s : ls) {
    const attention_case c = probe_case(base, s, input_dist::m_normal, mask_kind::m_none, k_sweep_queries);
    attention_probe_options po;
    po.sampling.max_rows = 0;
    po.end_to_end = false;
    po.worst = 0;
    out.cases.push_back(c.id());
    attention_point pt;
    try {
      pt = run_attention_point(p, c, po);
    } catch (const error& e) {
      out.errors.push_back(fmt::format("{}: {}", c.id(), e.what()));
      continue;
    }
    const double r = pt.kernel.nan_count + pt.kernel.inf_count > 0 ? 1e6 : pt.ratio_to_naive;
    lengths.push_back(s);
    y.push_back(std::log(std::clamp(r, 1e-6, 1e6)));
  }
  out.sweep_lengths = lengths;
  if (lengths.size() < 8) return false;
  std::vector<double> sorted = y;
  std::sort(sorted.begin(), sorted.end());
  double gap = 0, cut = 0;
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] - sorted[i - 1] > gap) {
      gap = sorted[i] - sorted[i - 1];
      cut = 0.5 * (sorted[i] + sorted[i - 1]);
    }
  if (gap < k_min_gap) {
    if (out.evidence.empty())
      out.evidence = fmt::format("length sweep ({} lengths 16..768): no separate cluster of failing lengths "
                                 "(largest gap x{:.1f})", lengths.size(), std::exp(gap));
    return false;
  }
  std::vector<std::int64_t> fails, passes;
  for (std::size_t i = 0; i < lengths.size(); ++i) (y[i] > cut ? fails : passes).push_back(lengths[i]);
  out.failing_lengths = fails;
  // Each candidate predicts which lengths fail (the non-multiples of B for a tail fault, the
  // multiples for the reverse); the Matthews correlation of predicted and observed failures
  // scores it, so a prediction that calls nearly every length failing gains nothing from a
  // kernel that fails nearly everywhere.
  std::vector<tile_candidate_score> scores;
  for (std::int64_t b : tile_candidates()) {
    for (const bool tail : {true, false}) {
      tile_candidate_score sc;
      sc.k = b;
      sc.model = tail ? "passes at multiples" : "fails at multiples";
      double tp = 0, tn = 0, fp = 0, fn = 0;
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        const bool pred = (lengths[i] % b == 0) != tail;
        const bool obs = y[i] > cut;
        (pred ? (obs ? tp : fp) : (obs ? fn : tn)) += 1;
      }
      sc.predicted = static_cast<std::int64_t>(tp + fp);
      sc.observed = static_cast<std::int64_t>(tp + fn);
      sc.matched = static_cast<std::int64_t>(tp + tn);  // lengths predicted right
      sc.metric = "MCC";
      const double den = std::sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn));
      sc.score = den > 0 ? std::max(0.0, (tp * tn - fp * fn) / den) : 0.0;
      scores.push_back(sc);
    }
  }
  return decide(scores, "length sweep",
                fmt::format("length sweep ({} lengths 2B, 5B/2, 3B; {} fail, gap x{:.1f})", lengths.size(),
                            fails.size(), std::exp(gap)),
                out);
}

}  // namespace

std::vector<std::int64_t> tile_candidates() {
  std::vector<std::int64_t> v;
  for (std::int64_t b = 8; b <= 256; b += 8) v.push_back(b);
  return v;
}

std::vector<std::int64_t> common_tile_lengths(std::int64_t lo, std::int64_t hi, std::size_t cap) {
  static constexpr std::int64_t common[] = {16, 32, 48, 64, 80, 96, 112, 128, 192, 256};
  std::set<std::int64_t> out;
  // Fewer k per tile size until the set fits the cap: k = 1, 2, 3 first (where a tail tile is
  // a large part of the row), then spread in log space up to hi.
  for (int per_tile = 6; per_tile >= 1; --per_tile) {
    out.clear();
    for (std::int64_t b : common) {
      const std::int64_t k_lo = std::max<std::int64_t>(1, (lo + 1) / b), k_hi = (hi - 1) / b;
      if (k_hi < k_lo) continue;
      std::set<std::int64_t> ks;
      for (std::int64_t k = k_lo; k <= std::min(k_hi, k_lo + 2) && static_cast<int>(ks.size()) < per_tile; ++k)
        ks.insert(k);
      const int rest = per_tile - static_cast<int>(ks.size());
      for (int i = 1; i <= rest; ++i) {
        const double f = static_cast<double>(i) / rest;
        ks.insert(std::llround(std::exp(std::log(double(k_lo)) * (1 - f) + std::log(double(k_hi)) * f)));
      }
      for (std::int64_t k : ks)
        for (std::int64_t s : {k * b - 1, k * b, k * b + 1})
          if (s >= lo && s <= hi) out.insert(s);
    }
    if (out.size() <= cap) break;
  }
  if (out.empty()) {
    out.insert(lo);
    out.insert(hi);
  }
  return {out.begin(), out.end()};
}

tile_inference infer_tile(attention_provider& provider, const attention_case& base,
                          const tile_inference_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  tile_inference out;
  out.ran = true;
  out.confidence = "unknown";
  bool done = false;
  if (o.row_profiles) {
    // Rescale stress first (the max rises on every key, so rescale faults step on every tile),
    // then plain N(0,1) inputs.
    done = from_row_profiles(provider, base, input_dist::m_rescale_stress, out);
    if (!done) done = from_row_profiles(provider, base, input_dist::m_normal, out);
  }
  // The sweep costs ~80 cases: it runs when the profiles could not run (a kernel without a
  // causal mask) or saw steps they could not explain, not when every profile was smooth.
  const bool smooth = !out.profile_lengths.empty() && out.event_rows.empty() && out.errors.empty();
  if (!done && o.length_sweep && out.confidence != "medium" && !smooth)
    (void)from_length_sweep(provider, base, out);
  if (out.evidence.empty()) out.evidence = "no probe ran";
  if (!out.known()) out.confidence = "unknown";
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

nlohmann::json to_json(const tile_inference& t) {
  auto score = [](const tile_candidate_score& s) {
    return nlohmann::json{{"k", s.k}, {"model", s.model}, {"score", s.score}, {"metric", s.metric}, {"predicted", s.predicted},
                          {"observed", s.observed}, {"matched", s.matched}};
  };
  return {{"q", t.q},
          {"k", t.k},
          {"confidence", t.confidence},
          {"evidence", t.evidence},
          {"signal", t.signal},
          {"best", score(t.best)},
          {"second", score(t.second)},
          {"profile_lengths", t.profile_lengths},
          {"event_rows", t.event_rows},
          {"sweep_lengths", t.sweep_lengths},
          {"failing_lengths", t.failing_lengths},
          {"cases", t.cases.size()},
          {"errors", t.errors},
          {"seconds", t.seconds}};
}

std::string tile_text(const tile_inference& t) {
  if (!t.ran) return "unknown (not inferred)";
  if (!t.known()) return fmt::format("unknown ({})", t.evidence);
  return fmt::format("{}x{} (inferred, {}: {})", t.q > 0 ? std::to_string(t.q) : "?", t.k, t.confidence,
                     t.evidence);
}

}  // namespace numprobe::probes
