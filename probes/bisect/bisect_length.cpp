#include "probes/bisect/bisect_length.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <set>

#include "numprobe/base/error.hpp"

namespace numprobe::probes {
namespace {

bool is_pow2(std::int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

attention_case at_length(attention_case c, std::int64_t s) {
  c.seq = s;
  return c;
}

// Caches measurements by length so no length is run twice. decide() sets the decision of a
// step measured by the last at() call only (a cached step keeps its first decision).
struct length_oracle {
  bisect_context& ctx;
  const attention_case& base;
  std::map<std::int64_t, std::size_t> index;
  std::size_t last_index = 0;
  bool fresh = false;

  const bisect_step& at(std::int64_t s, const std::string& stage, const std::string& why) {
    if (auto it = index.find(s); it != index.end()) {
      fresh = false;
      last_index = it->second;
    } else {
      (void)ctx.evaluate(stage, at_length(base, s), fmt::format("seq={} ({})", s, why));
      fresh = true;
      last_index = index[s] = ctx.trace().size() - 1;
    }
    return ctx.trace()[last_index];
  }
  void decide(const std::string& d) {
    if (fresh) ctx.trace()[last_index].decision = d;
  }
};

// The scan when the longest length passes: lengths that are not tile multiples for any usual
// B (3P/2-1 is odd and leaves a long partial tail tile) interleaved with the powers of two, so
// a tail-tile fault that spares tile multiples is still found.
std::vector<std::int64_t> scan_lengths(std::int64_t lo, std::int64_t hi) {
  std::set<std::int64_t> out;
  for (std::int64_t p = 1; p <= hi; p *= 2) {
    if (p >= lo) out.insert(p);
    const std::int64_t odd = p + p / 2 - 1;
    if (p >= 2 && odd >= lo && odd <= hi) out.insert(odd);
  }
  out.insert(lo);
  return {out.begin(), out.end()};
}

}  // namespace

length_result bisect_length(bisect_context& ctx, const attention_case& base, std::int64_t lo,
                            std::int64_t hi) {
  if (lo < 1 || hi < lo) throw_input_error("--seq", fmt::format("need 1 <= A <= B, got {}..{}", lo, hi));
  length_result r;
  length_oracle oracle{ctx, base, {}, 0, false};

  // 1. A failing length: the longest first (the usual report: fine short, drifts long).
  std::int64_t fail = 0, pass = 0;
  {
    const bool f = oracle.at(hi, "length", "longest length").failed;
    oracle.decide(f ? "fails: bisect below it" : "passes: scan shorter, non-tile-multiple lengths");
    if (f) fail = hi;
  }
  if (!fail) {
    for (std::int64_t s : scan_lengths(lo, hi)) {
      if (s == hi) continue;
      const bool f = oracle.at(s, "length", "scan").failed;
      oracle.decide(f ? "fails: bisect between the last passing length and this one" : "passes");
      if (f) {
        fail = s;
        break;
      }
      pass = s;
    }
    if (!fail) return r;  // no failure anywhere: never invent a culprit
  }
  r.found = true;
  // 2. A passing length below it.
  if (!pass) {
    if (lo < fail) {
      const bool f = oracle.at(lo, "length", "shortest length").failed;
      oracle.decide(f ? "fails too: the failure starts at or below the shortest length"
                                 : "passes: bisect between here and the failing length");
      if (!f) pass = lo;
    }
  }
  if (!pass) {
    r.fails_at_lowest = true;
    r.first_failing = lo;
  } else {
    // 3. Binary search for the boundary: pass < first failing <= fail.
    while (fail - pass > 1) {
      const std::int64_t mid = pass + (fail - pass) / 2;
      const bool f = oracle.at(mid, "length", fmt::format("bisect {}..{}", pass, fail)).failed;
      oracle.decide(f ? fmt::format("fails: boundary in ({}, {}]", pass, mid)
                                 : fmt::format("passes: boundary in ({}, {}]", mid, fail));
      (f ? fail : pass) = mid;
    }
    r.first_failing = fail;
    r.last_passing = pass;
    const double e_fail = ctx.trace()[oracle.index[fail]].gate_value;
    const double e_pass = ctx.trace()[oracle.index[pass]].gate_value;
    r.step_factor = (std::isfinite(e_fail) && e_pass > 0) ? e_fail / e_pass
                                                         : std::numeric_limits<double>::infinity();
  }
  const std::int64_t ff = r.first_failing;

  // 4. Tile boundaries around it. B from the kernel, else inferred from cheap cases (issue 14:
  // a kernel with key tile 96 must not be read against B=16), else the common tile sizes tried
  // smallest first (a tail pattern at B also holds at 2B, never at B/2).
  const tile_shape kt = ctx.tiles();
  std::vector<std::int64_t> candidates;
  if (kt.known()) {
    candidates = {kt.k};
    r.tile_source = ctx.base_provider().tile ? "--tile" : "kernel";
  } else {
    auto prov = make_attention_provider(ctx.base_provider());
    r.inferred = infer_tile(*prov, base);
    if (r.inferred.known()) {
      candidates = {r.inferred.k};
      r.tile_source = "inferred";
    } else {
      candidates = {16, 32, 48, 64, 80, 96, 112, 128, 192, 256};
      r.tile_source = "tried";
    }
  }
  for (std::int64_t b : candidates) {
    // k around the first failure, and two larger multiples so one threshold crossing cannot
    // pass for a tile pattern.
    const std::int64_t k0 = std::max<std::int64_t>(1, (ff + b / 2) / b);
    std::vector<tile_probe> probes;
    for (std::int64_t k : {k0, k0 + 1, 2 * k0 + 1}) {
      for (std::int64_t s : {k * b - 1, k * b, k * b + 1}) {
        if (s < 1) continue;
        const bool f = oracle.at(s, "tile", fmt::format("k*B{:+} with B={}, k={}", s - k * b, b, k)).failed;
        oracle.decide(f ? "fails" : "passes");
        probes.push_back({s, b, f, ctx.trace()[oracle.index[s]].gate_value});
      }
    }
    // Tail-tile signature: every multiple passes while k*B-1 fails for every k (or the reverse:
    // every multiple fails and no non-multiple does).
    bool mult_all_pass = true, mult_all_fail = true, minus_all_fail = true, non_all_pass = true;
    for (const auto& p : probes) {
      const bool mult = p.seq % b == 0;
      if (mult) {
        mult_all_pass &= !p.failed;
        mult_all_fail &= p.failed;
      } else {
        non_all_pass &= !p.failed;
        if ((p.seq + 1) % b == 0) minus_all_fail &= p.failed;
      }
    }
    r.boundary.insert(r.boundary.end(), probes.begin(), probes.end());
    std::string pattern = "not-aligned";
    if (mult_all_pass && minus_all_fail) pattern = "non-multiples";
    else if (mult_all_fail && non_all_pass) pattern = "multiples";
    if (pattern != "not-aligned" || r.tile == 0) {
      r.tile = b;
      r.tile_pattern = pattern;
      r.tile_aligned = pattern != "not-aligned";
    }
    if (r.tile_aligned) {
      ctx.trace().back().decision += fmt::format("; failures follow the tile B={} ({})", b, pattern);
      break;
    }
  }
  if (!r.tile_aligned)
    ctx.trace().back().decision += "; failures do not follow tile multiples";

  // 5. Power-of-two step: the error jumps (x10, or NaN appears) at 2^n or 2^n+1.
  // Steps within the first few tiles are the tile walk starting (a first rescale, a second
  // tile), not an index threshold: only steps past 16 tiles count.
  const std::int64_t walk = 16 * (r.tile > 0 ? r.tile : 128);
  if (!r.fails_at_lowest && ff > walk && (is_pow2(ff) || is_pow2(ff - 1)) && r.step_factor >= 10.0) {
    bool above_fail = true;
    for (const auto& p : r.boundary)
      if (p.seq >= ff) above_fail &= p.failed;
    r.power_of_two_step = above_fail && !r.tile_aligned;
  }
  return r;
}

}  // namespace numprobe::probes
