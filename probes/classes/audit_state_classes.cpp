// The audit's softmax-state classes (see audit_kit.hpp): empty or masked split, finite
// sentinel, rescale or merge frame.
#include "probes/classes/audit_kit.hpp"

#include <fmt/format.h>
#include <utility>
#include <vector>

#include "probes/classes/bisect_precision.hpp"

namespace numprobe::probes::audit_kit {

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
  bool judged = false;
  for (const auto& p : probes) judged = judged || (p.ok() && control.ok() && !control.nonfinite());
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
  verdict(k, fail, judged);
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
  bool judged = false;
  if (small.ran && !small.error && !small.nonfinite() && small.step.rel_rms < 0.1) {
    for (std::size_t i = 1; i < shifts.size(); ++i) judged = judged || shifts[i].second.ok();
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
  verdict(k, fail, judged);
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
  // Judged when the probe and at least one control were measured; it fails when it contrasts
  // with every control that was measured.
  const bool judged = rs.ok() && (mf.passed() || flat.passed());
  const bool fail = judged && (!mf.ok() || contrast(rs, mf)) && (!flat.ok() || contrast(rs, flat));
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
  verdict(k, fail, judged);
  return k;
}

}  // namespace numprobe::probes::audit_kit
