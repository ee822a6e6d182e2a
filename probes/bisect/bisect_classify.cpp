#include "probes/bisect/bisect_classify.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace numprobe::probes {
namespace {

std::string err(const probe_outcome& o) {
  if (o.nan) return fmt::format("NaN/Inf x{}", o.nan);
  return fmt::format("ratio_to_naive {:.3g}, rel_rms {:.3g} [step {}]", o.ratio, o.rel_rms, o.step);
}

// A failure under the probe that its control does not show: the control passes, or the probe's
// error is at least 10x the control's.
bool contrast(const probe_outcome& probe, const probe_outcome& control) {
  if (!probe.ran || !control.ran || !probe.failed) return false;
  if (!control.failed) return true;
  return !control.nan && (probe.nan || probe.rel_rms >= 10.0 * control.rel_rms);
}

class_finding finding(const std::string& name) { return {name, "not supported", {}, {}}; }

void settle(class_finding& f, bool supported) {
  f.verdict = supported ? "supported" : "not supported";
}

}  // namespace

std::vector<class_finding> classify(const classification_inputs& in) {
  std::vector<class_finding> out;
  const auto& L = *in.length;
  const auto& F = *in.families;
  const auto& P = *in.precision;

  // Rescale or merge frame.
  {
    auto f = finding("rescale or merge frame");
    const probe_outcome& rs = in.rescale_stress_fixed ? *in.rescale_stress_fixed : F.rescale_stress;
    const probe_outcome& mf = in.max_first_fixed ? *in.max_first_fixed : F.max_first;
    const probe_outcome& fl = in.flat_fixed ? *in.flat_fixed : F.flat;
    const std::string fixed = in.rescale_stress_fixed ? " (precision culprit upgraded)" : "";
    bool sup = false;
    // Both controls, as the audit's class: the max on the first key, and flat logits (the max
    // never rises, so no rescale happens). A bug that fails flat rows as well (a reduction that
    // drops lanes, a running sum held short) does not need a rising max.
    if (contrast(rs, mf) && (!fl.ran || contrast(rs, fl))) {
      sup = true;
      f.evidence_for.push_back(fmt::format("rescale-stress {} against max-first {}{}: {}", err(rs), err(mf),
                                           fixed, factor_text(rs.rel_rms, mf.rel_rms)));
      if (fl.ran) f.evidence_for.push_back(fmt::format("flat logits (no rescale) {}{}", err(fl), fixed));
    } else if (!rs.failed) {
      f.evidence_against.push_back(fmt::format("rescale-stress passes{} ({})", fixed, err(rs)));
    } else if (contrast(rs, mf)) {
      f.evidence_against.push_back(fmt::format("flat logits, where the max never rises, fail as well{} ({} vs "
                                               "rescale-stress {}): not specific to a rising max",
                                               fixed, err(fl), err(rs)));
    } else {
      f.evidence_against.push_back(fmt::format("max-first fails as well{} ({} vs {}): not specific to a rising max",
                                               fixed, err(mf), err(rs)));
    }
    if (in.mechanisms)
      for (const auto& m : *in.mechanisms)
        if (m.ran && (m.name == "one key tile" || m.name == "rescale forced on every tile")) {
          (m.removes ? f.evidence_for : f.evidence_against)
              .push_back(fmt::format("{} {} the error ({:.3g} -> {:.3g})", m.name,
                                     m.removes ? "removes" : "does not remove", m.before, m.after));
        }
    if (in.decode && in.decode->ran) {
      const auto& Dc = *in.decode;
      if (Dc.single_split.ran)
        (Dc.single_split.removes ? f.evidence_for : f.evidence_against)
            .push_back(fmt::format("one split (no merge) {} the error ({:.3g} -> {:.3g})",
                                   Dc.single_split.removes ? "removes" : "does not remove", Dc.single_split.before,
                                   Dc.single_split.after));
      if (Dc.merge_fault == "lse-base2-merge" || Dc.merge_fault == "merge") {
        sup = true;
        f.evidence_for.push_back(Dc.text);
      }
    }
    settle(f, sup);
    out.push_back(f);
  }

  // Low-precision accumulation.
  {
    auto f = finding("low-precision accumulation");
    bool sup = false;
    if (P.ran) {
      if (!P.culprit.empty()) {
        sup = true;
        std::string set;
        for (const auto& s : P.culprit) set += (set.empty() ? "" : ",") + s;
        f.evidence_for.push_back(fmt::format("upgrading state {{{}}} to f64 removes the failure of {}", set,
                                             P.family_case));
        if (P.curve_lengths.size() >= 2)
          f.evidence_for.push_back(fmt::format("error at S={}: {:.3g} -> {:.3g} with the upgrade",
                                               P.curve_lengths.back(), P.curve_before.back(), P.curve_after.back()));
      } else {
        f.evidence_against.push_back("upgrading every state (q,k,v,s,p,m,l,o) to f64 does not remove the failure");
      }
    }
    // The fp8 MMA accumulator: promoting it to fp32 after every key tile removes the failure.
    if (in.fp8 && in.fp8->ran) {
      const auto& X = *in.fp8;
      const bool acc = std::find(X.culprit.begin(), X.culprit.end(), "acc") != X.culprit.end();
      for (const auto& x : X.restorations)
        if (x.points.size() == 1 && x.points.front() == "acc") {
          (acc ? f.evidence_for : f.evidence_against)
              .push_back(fmt::format("fp8 accumulator promoted every key tile: {} against {}", err(x.outcome),
                                     err(X.before)));
        }
      if (acc && X.verdict != "ambiguous") sup = true;
    }
    if (F.diffuse.failed && !F.diffuse.nan) {
      const bool grows = F.diffuse_grows || F.diffuse_slope > 0.5;
      (grows ? f.evidence_for : f.evidence_against)
          .push_back(fmt::format("diffuse rows fail ({}); from S={} to S={} the error rose x{:.3g}, rel_rms slope vs "
                                 "length {:.2f}, ratio_to_naive slope {:.2f} +- {:.2f}: {}",
                                 err(F.diffuse), F.diffuse_lengths.empty() ? 0 : F.diffuse_lengths.front(), F.diffuse_length,
                                 F.diffuse_rise, F.diffuse_slope, F.diffuse_ratio_slope,
                                 F.diffuse_ratio_slope_stderr,
                                 grows ? "the error grows with length" : "no growth with length"));
      // Without state knobs, a growing diffuse error is the evidence (and a weaker one), unless
      // the diffuse rows lost their output entirely (rel_rms >= 0.5: every P ~ 1/S flushed)
      // while the sink loses mass from the numerator only: that growth is P quantized inside the
      // kernel (fp8 scaling). A smaller rise beside a numerator-only sink stays a candidate: an O
      // accumulator held short drops the sink's small terms too, and from outside the two look
      // alike (both classes are then reported).
      const bool p_quantized = !(in.fp8 && in.fp8->ran) && !in.state_knobs && numerator_only_loss(F.sink) &&
                               F.diffuse.rel_rms >= 0.5;
      if (!P.ran && grows && p_quantized)
        f.evidence_against.push_back(fmt::format("the diffuse rows lose their output (rel_rms {:.3g}) and the attention "
                                                 "sink loses mass from the numerator only (O bias {:+.3g}, LSE exact): "
                                                 "P flushed inside the kernel (fp8 scaling), not a running sum",
                                                 F.diffuse.rel_rms, F.sink.bias));
      if (!P.ran && grows && !p_quantized) sup = true;
    } else if (!F.diffuse.failed) {
      f.evidence_against.push_back(fmt::format("diffuse rows pass ({})", err(F.diffuse)));
    }
    settle(f, sup);
    out.push_back(f);
  }

  // Finite sentinel: the output collapses (O ~ 0, rel_rms ~ 1, or NaN) once logits pass the
  // sentinel, while a -1e3 shift is fine. Judged on rel_rms, not on the ratio: the naive
  // baseline rounds scores to the input dtype and is itself meaningless at such shifts. A healthy
  // kernel with fp32 scores loses a few percent at -1e6, far from a collapse.
  {
    auto f = finding("finite sentinel");
    const probe_outcome* small = nullptr;
    bool sup = false;
    for (const auto& s : F.shifts) {
      if (s.shift == -1e3) {
        small = &s.outcome;
        continue;
      }
      if (!small || small->nan || small->rel_rms >= 0.1) continue;
      const bool collapse = s.outcome.nan || s.outcome.rel_rms >= 0.5;
      if (collapse && (s.outcome.nan || s.outcome.rel_rms >= 10.0 * small->rel_rms)) {
        sup = true;
        f.evidence_for.push_back(fmt::format("logits shifted to {:g}: output collapses ({}) against {} at -1e3",
                                             s.shift, err(s.outcome), err(*small)));
        break;
      }
    }
    if (!sup && small)
      f.evidence_against.push_back(fmt::format("no collapse for shifts -1e3...-1e6 (-1e3: {})", err(*small)));
    settle(f, sup);
    out.push_back(f);
  }

  // Mask geometry: the kernel's mask against the same key sets given explicitly.
  {
    auto f = finding("mask geometry");
    bool sup = false;
    for (const auto& m : F.masks) {
      if (m.kernel_mask.nan) continue;  // NaN belongs to the empty-row guard, below
      if (contrast(m.kernel_mask, m.explicit_ranges)) {
        sup = true;
        f.evidence_for.push_back(fmt::format("{}: {} while the same keys as explicit ranges give {}", m.label,
                                             err(m.kernel_mask), err(m.explicit_ranges)));
      }
    }
    if (F.masks.empty()) {
      f.verdict = "not tested";
      f.evidence_against.push_back("decode takes masks none and causal only: no mask-geometry probe");
    } else {
      if (!sup)
        f.evidence_against.push_back("T=3 under both causal alignments and windows W-1, W, W+1 match the same "
                                     "key sets given explicitly");
      settle(f, sup);
    }
    out.push_back(f);
  }

  // Empty or masked split.
  {
    auto f = finding("empty or masked split");
    bool sup = false;
    const bool clean_control = F.normal.nan == 0;
    if (F.masked_rows.nan && clean_control) {
      sup = true;
      f.evidence_for.push_back(fmt::format("fully masked rows (T > S): {} while unmasked rows give none",
                                           err(F.masked_rows)));
    }
    for (const auto& m : F.masks)
      if (m.kernel_mask.nan && clean_control) {
        sup = true;
        f.evidence_for.push_back(fmt::format("{}: {} (rows with an all-masked key tile)", m.label, err(m.kernel_mask)));
      }
    if (sup && in.decode && in.decode->merge_fault == "merge-nan-empty") f.evidence_for.push_back(in.decode->text);
    if (!sup) f.evidence_against.push_back("no NaN/Inf in fully masked rows or at window edges");
    if (L.found && !L.fails_at_lowest && sup)
      f.evidence_against.push_back(fmt::format("the case under test fails from S={} on (this class does not "
                                               "depend on length)", L.first_failing));
    settle(f, sup);
    out.push_back(f);
  }

  // Paged or tail tile.
  {
    auto f = finding("paged or tail tile");
    if (L.tile_aligned)
      f.evidence_for.push_back(fmt::format("around S={}: failures at the {} of B={} only", L.first_failing,
                                           L.tile_pattern, L.tile));
    else
      f.evidence_against.push_back(fmt::format("k*B-1, k*B, k*B+1 (B={}) do not separate passing from failing",
                                               L.tile));
    bool sup = L.tile_aligned;
    if (in.decode && in.decode->ran) {
      const auto& Dc = *in.decode;
      if (Dc.merge_fault == "split-tail-drop") {
        sup = true;
        f.evidence_for.push_back(Dc.text);
      }
      if (Dc.page_dependent) f.evidence_for.push_back("the failure depends on the page size");
    }
    settle(f, sup);
    out.push_back(f);
  }

  // Index or dispatch threshold.
  {
    auto f = finding("index or dispatch threshold");
    if (L.power_of_two_step)
      f.evidence_for.push_back(fmt::format("error steps {} at S={} (a power of two) and stays failing",
                                           factor_text(L.step_factor, 1.0), L.first_failing));
    else
      f.evidence_against.push_back(L.fails_at_lowest ? "fails from the shortest length tried"
                                                     : fmt::format("no step at a power of two (x{:.3g} at S={})",
                                                                   L.step_factor, L.first_failing));
    settle(f, L.power_of_two_step);
    out.push_back(f);
  }

  // GQA mapping.
  {
    auto f = finding("GQA mapping");
    const bool sup = contrast(F.constant_v_grouped, F.constant_v_ungrouped);
    if (sup)
      f.evidence_for.push_back(fmt::format("distinct constant V per KV head: group 2 {} against group 1 {}",
                                           err(F.constant_v_grouped), err(F.constant_v_ungrouped)));
    else
      f.evidence_against.push_back(fmt::format("constant V per KV head: group 2 {}, group 1 {}",
                                               err(F.constant_v_grouped), err(F.constant_v_ungrouped)));
    settle(f, sup);
    out.push_back(f);
  }

  // FP8 scaling: restoring K/V to the input dtype, or P unquantized, removes the failure
  // (an ignored or badly laid out cache scale, P quantized without its pre-scale).
  if (in.fp8 && in.fp8->ran) {
    const auto& X = *in.fp8;
    auto f = finding("fp8 scaling");
    bool sup = false;
    for (const auto& x : X.restorations) {
      if (x.points.size() != 1 || x.points.front() == "acc") continue;
      const bool named = std::find(X.culprit.begin(), X.culprit.end(), x.points.front()) != X.culprit.end();
      (named ? f.evidence_for : f.evidence_against)
          .push_back(fmt::format("{} restored: {} against {}", x.points.front() == "kv" ? "K/V cache" : "P",
                                 err(x.outcome), err(X.before)));
      if (named && X.verdict != "ambiguous") sup = true;
    }
    if (X.verdict == "all" || X.verdict == "partial") {
      for (const auto& p : X.culprit)
        if (p != "acc") sup = true;
      f.evidence_for.push_back(X.text);
    }
    settle(f, sup);
    out.push_back(f);
  } else if (F.sink.ran && !in.state_knobs) {
    // An opaque kernel without fp8 points configured: P quantized inside the kernel shows as a
    // numerator-only loss under the attention sink (the audit's probe).
    auto f = finding("fp8 scaling");
    const bool sup = numerator_only_loss(F.sink);
    (sup ? f.evidence_for : f.evidence_against)
        .push_back(fmt::format("attention sink ({}): signed bias of O {:+.3g}, LSE max error {}: {}", err(F.sink),
                               F.sink.bias,
                               std::isfinite(F.sink.lse_max_abs) ? fmt::format("{:.3g} nats", F.sink.lse_max_abs)
                                                                 : std::string("unknown (no LSE)"),
                               sup ? "mass lost from the numerator only (P quantized for P.V, l not)"
                                   : "no numerator-only loss"));
    settle(f, sup);
    out.push_back(f);
  } else {
    class_finding f{"fp8 scaling", "not tested", {}, {}};
    f.evidence_against.push_back("the case quantizes no fp8 point (kv-format, p-format, acc-promote)");
    out.push_back(f);
  }
  {
    class_finding f{"sub-byte formats", "not tested", {}, {}};
    f.evidence_against.push_back("attention kernels take no sub-byte inputs here (audit quantizers with quant)");
    out.push_back(f);
  }

  // Wavefront width: every flat row of 33..65 keys fails (S = 64 too, a whole tile: not a tail
  // tile) while every row of at most 32 keys holds, as the audit's class. Flat logits keep the
  // max still, so no rescale bug passes for it.
  {
    auto f = finding("wavefront width");
    bool narrow_pass = !F.narrow_rows.empty(), wide_fail = !F.wide_rows.empty();
    const probe_outcome* first_narrow_fail = nullptr;
    const probe_outcome* first_wide_pass = nullptr;
    const lane_probe* at64 = nullptr;
    for (const auto& p : F.narrow_rows) {
      narrow_pass = narrow_pass && p.outcome.ran && !p.outcome.failed;
      if (p.outcome.failed && !first_narrow_fail) first_narrow_fail = &p.outcome;
    }
    for (const auto& p : F.wide_rows) {
      wide_fail = wide_fail && p.outcome.ran && p.outcome.failed && !p.outcome.nan;
      if (!p.outcome.failed && !first_wide_pass) first_wide_pass = &p.outcome;
      if (p.seq == 64) at64 = &p;
    }
    const bool sup = narrow_pass && wide_fail;
    if (F.narrow_rows.empty() || F.wide_rows.empty()) {
      f.verdict = "not tested";
      f.evidence_against.push_back("no flat-logit rows of 16..65 keys were measured");
    } else {
      const probe_outcome& w = at64 ? at64->outcome : F.wide_rows.front().outcome;
      const probe_outcome& n = F.narrow_rows.back().outcome;
      if (sup)
        f.evidence_for.push_back(fmt::format("flat logits: every row of 33..65 keys fails (S=64 too: not a tail tile; "
                                             "S=64 {}) while every row of <= 32 keys holds (S=32 {})",
                                             err(w), err(n)));
      else if (first_narrow_fail)
        f.evidence_against.push_back(fmt::format("flat rows of <= 32 keys fail too ({})", err(*first_narrow_fail)));
      else
        f.evidence_against.push_back(fmt::format("flat rows of 33..65 keys {} ({})",
                                                 first_wide_pass ? "hold" : "fail with NaN/Inf",
                                                 err(first_wide_pass ? *first_wide_pass : w)));
      settle(f, sup);
    }
    out.push_back(f);
  }
  return out;
}

std::string classification_of(bool failure_found, const std::vector<class_finding>& f) {
  if (!failure_found) return "no failure";
  std::vector<std::string> sup;
  for (const auto& c : f)
    if (c.verdict == "supported") sup.push_back(c.name);
  if (sup.empty()) return "unclassified";
  if (sup.size() == 1) return sup.front();
  return "ambiguous";
}

}  // namespace numprobe::probes
