#include "probes/classes/bisect_precision.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace numprobe::probes {
namespace {

// The states precision bisection may upgrade. out and lse are what the kernel writes, in the
// output dtype by contract, so they are not candidates.
const std::vector<std::string>& bisect_states() {
  static const std::vector<std::string> s{"q", "k", "v", "s", "p", "m", "l", "o"};
  return s;
}

std::string braced_set(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "{}" : "{" + out + "}";
}

// Upgrading a set and checking the bound, with results cached by set.
struct upgrade_oracle {
  bisect_context& ctx;
  attention_case c;
  probe_outcome baseline;
  std::map<std::vector<std::string>, bool> seen;

  bool passes(std::vector<std::string> set) {
    std::sort(set.begin(), set.end());
    if (auto it = seen.find(set); it != seen.end()) return it->second;
    const auto o = measure(ctx, "precision", c, with_states_f64(ctx.base_provider(), set),
                           fmt::format("states {} -> f64", braced_set(set)));
    // Under the bound, and at least half the error: a borderline case must not be tipped
    // under the bound by an unrelated state.
    const bool ok = !o.failed && (baseline.nan || o.rel_rms <= 0.5 * baseline.rel_rms);
    ctx.trace().back().decision = ok ? "passes: this upgrade removes the failure" : "still fails";
    seen[set] = ok;
    return ok;
  }
};

// Zeller's ddmin: a 1-minimal subset of `all` whose upgrade passes (passes(all) holds).
std::vector<std::string> ddmin(upgrade_oracle& o, std::vector<std::string> set) {
  std::size_t n = 2;
  while (set.size() >= 2) {
    const std::size_t chunk = (set.size() + n - 1) / n;
    bool reduced = false;
    for (std::size_t i = 0; i < set.size() && !reduced; i += chunk) {
      std::vector<std::string> part(set.begin() + static_cast<std::ptrdiff_t>(i),
                                    set.begin() + static_cast<std::ptrdiff_t>(std::min(set.size(), i + chunk)));
      if (o.passes(part)) {
        set = part;
        n = 2;
        reduced = true;
      }
    }
    for (std::size_t i = 0; i < set.size() && !reduced && n > 2; i += chunk) {
      std::vector<std::string> complement;
      for (std::size_t j = 0; j < set.size(); ++j)
        if (j < i || j >= i + chunk) complement.push_back(set[j]);
      if (o.passes(complement)) {
        set = complement;
        n = std::max<std::size_t>(n - 1, 2);
        reduced = true;
      }
    }
    if (!reduced) {
      if (n >= set.size()) break;
      n = std::min(set.size(), 2 * n);
    }
  }
  return set;
}

}  // namespace

precision_result bisect_precision(bisect_context& ctx, const std::vector<precision_candidate>& candidates) {
  precision_result r;
  if (!ctx.state_knobs()) {
    r.reason = "the backend exposes no state dtypes";
    return r;
  }
  r.ran = true;
  for (const auto& cand : candidates) {
    const attention_case& c = cand.c;
    upgrade_oracle o{ctx, c, cand.baseline, {}};
    if (!o.passes(bisect_states())) continue;
    r.all_f64_fixes = true;
    r.family_case = c.id();
    for (const auto& s : bisect_states())
      if (o.passes({s})) r.single_fixes.push_back(s);
    r.culprit = r.single_fixes.empty() ? ddmin(o, bisect_states())
                                       : std::vector<std::string>{r.single_fixes.front()};
    ctx.trace().back().decision += fmt::format("; minimal set {}", braced_set(r.culprit));
    // The error curve before and after the upgrade.
    for (std::int64_t div : {8, 4, 2, 1}) {
      const std::int64_t s = c.seq / div;
      if (s < 16 && div != 1) continue;
      attention_case cs = c;
      cs.seq = s;
      const auto before = measure(ctx, "precision", cs, ctx.base_provider(),
                                  fmt::format("curve S={}, state as the kernel holds it", s));
      const auto after = measure(ctx, "precision", cs, with_states_f64(ctx.base_provider(), r.culprit),
                                 fmt::format("curve S={}, states {} -> f64", s, braced_set(r.culprit)));
      r.curve_lengths.push_back(s);
      r.curve_before.push_back(before.error);
      r.curve_after.push_back(after.error);
    }
    return r;
  }
  r.reason = candidates.empty() ? "no failing case to bisect"
                                : "upgrading every state to f64 does not remove the failure";
  if (!candidates.empty()) ctx.trace().back().decision += "; no state precision explains the failure";
  return r;
}

mechanism_check check_forced_rescale(bisect_context& ctx, const attention_case& c, double before) {
  mechanism_check m;
  m.name = "rescale forced on every tile";
  m.before = before;
  if (!ctx.state_knobs()) {
    m.note = "the backend has no rescale switch";
    return m;
  }
  provider_options po = ctx.base_provider();
  po.knobs["force-rescale"] = "1";
  const auto o = measure(ctx, "mechanism", c, po, "rescale forced on every key tile");
  m.ran = true;
  m.after = o.error;
  m.removes = !o.failed;
  ctx.trace().back().decision = m.removes ? "passes: the kernel's rescale path carries the error"
                                          : "still fails: not the rescale path";
  return m;
}

mechanism_check check_one_key_tile(bisect_context& ctx, const attention_case& c, double before) {
  mechanism_check m;
  m.name = "one key tile";
  m.before = before;
  const tile_shape t = ctx.tiles();
  if (!ctx.state_knobs() || !t.known()) {
    m.note = "the backend's tiles cannot be set";
    return m;
  }
  if (c.seq > 4096) {
    m.note = "S above the largest emulated tile (4096)";
    return m;
  }
  provider_options po = ctx.base_provider();
  po.tile = tile_shape{t.q, c.seq};
  const auto o = measure(ctx, "mechanism", c, po, fmt::format("one key tile (tile {}x{})", t.q, c.seq));
  m.ran = true;
  m.after = o.error;
  m.removes = !o.failed;
  ctx.trace().back().decision = m.removes ? "passes: the multi-tile walk (rescale, tail tile) carries the error"
                                          : "still fails: not the tile walk";
  return m;
}

}  // namespace numprobe::probes
