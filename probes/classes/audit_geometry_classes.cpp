// The audit's classes of which keys and lanes a row reads (see audit_kit.hpp): mask geometry,
// GQA mapping, wavefront width.
#include "probes/classes/audit_kit.hpp"

#include <fmt/format.h>
#include <vector>

namespace numprobe::probes::audit_kit {

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
      if (w < 1) continue;  // a one-key tile (--tile 64x1): no window of W = 0
      attention_case c = family(base, L, s, input_dist::m_normal, mask_kind::m_window);
      c.window = w;
      probes.push_back(r.run(k, c, fmt::format("sliding window W={} (edge keys)", w)));
    }
  }
  bool fail = false;
  // Judged only with the T = S causal control holding (see below) and a probe measured.
  bool judged = false;
  for (const auto& p : probes) judged = judged || (p.ok() && control.passed());
  for (const auto& p : probes) {
    if (p.nonfinite()) continue;  // NaN at masked keys belongs to the empty-row class
    // Strict: the T = S causal control must hold. A mask bug cannot break it; when it breaks,
    // another bug is at work and the mask probes cannot be told from it.
    if (p.failed() && control.passed()) {
      fail = true;
      k.evidence.push_back(fmt::format("{} against {}", r.describe(p), r.describe(control)));
    }
  }
  std::size_t measured_n = 0;
  for (const auto& p : probes) measured_n += p.ok();
  if (!fail)
    k.evidence.push_back(!judged ? fmt::format("the control must hold for a contrast: {}", r.describe(control))
                         : control.failed()
                             ? fmt::format("{} of {} mask probes measured, but the control breaks the bound too, so "
                                           "they show no contrast: {}", measured_n, probes.size(), r.describe(control))
                             : fmt::format("{} of {} mask probes measured, and they hold as the control does: {}",
                                           measured_n, probes.size(), r.describe(control)));
  verdict(k, fail, judged);
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
  bool judged = false;
  for (const auto& g : grouped) judged = judged || (g.ok() && g1.passed());
  for (const auto& g : grouped)
    if (contrast(g, g1)) {
      fail = true;
      k.evidence.push_back(fmt::format("{} against group 1 {}", r.describe(g), r.describe(g1)));
    }
  if (!fail)
    k.evidence.push_back(fmt::format("groups 1, 4 and 7: {}; {}", r.describe(g1), r.describe(grouped.front())));
  verdict(k, fail, judged);
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
  bool lo_pass = true, hi_fail = true, lo_ok = false, hi_ok = false;
  for (const auto& m : lo) lo_pass = lo_pass && m.passed();
  for (const auto& m : hi) hi_fail = hi_fail && m.failed() && !m.nonfinite();
  for (const auto& m : lo) lo_ok = lo_ok || m.passed();
  for (const auto& m : hi) hi_ok = hi_ok || m.ok();
  const bool fail = lo_pass && hi_fail;
  if (fail)
    k.evidence.push_back(fmt::format("every row of 33..65 keys fails (S=64 too: not a tail tile) while rows of <= 32 keys "
                                     "hold: {} against {}", r.describe(hi[5]), r.describe(lo.back())));
  else
    k.evidence.push_back(fmt::format("rows of 33..65 keys: {}; rows of <= 32: {}", r.describe(hi[5]), r.describe(lo.back())));
  verdict(k, fail, lo_ok && hi_ok);
  return k;
}

}  // namespace numprobe::probes::audit_kit
