#include "probes/bisect/bisect.hpp"

#include "probes/classes/audit_classes.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <numeric>

namespace numprobe::probes {
namespace {

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

bisect_result run_bisect(const bisect_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  bisect_result r;
  std::vector<bound> bounds = o.bounds.empty() ? std::vector<bound>{default_bisect_bound()} : o.bounds;
  for (const auto& b : bounds) r.bounds.push_back(b.text());
  bisect_context ctx(o.provider, bounds, o.probe);
  ctx.on_step = o.on_step;
  r.provider = ctx.provider_name();
  r.provider_metadata = ctx.provider_metadata();
  attention_case base = o.base;
  base.seq = o.seq_hi;
  base.validate();
  r.base_case = base.id();

  // 1. Length.
  r.length = bisect_length(ctx, base, o.seq_lo, o.seq_hi);
  r.inferred_tile = r.length.inferred;
  r.failure_found = r.length.found;
  if (!r.failure_found) {
    // 1b. The case holds at every length: inputs that expose what its own cannot show, at the
    // longest length. A failing family becomes the case under test (the length bisected again).
    r.exposed.tried = true;
    const std::int64_t hi = o.seq_hi;
    struct exposing {
      input_dist dist;
      const char* why;
    };
    // Diffuse rows only: the class sweep below judges every other class against its control, but
    // its accumulation rule asks for a 4x rise over the lengths, which a sum held short at the
    // case's length may not reach (the zoo's rowsum_bf16: x1.65 from 768 to 4608 keys). Not
    // rescale-stress: its large rising logits break an fp8 configuration's bound without a bug.
    for (const exposing& x : {exposing{input_dist::m_diffuse, "near-uniform rows: long running sums"}}) {
      // T = min(S, 256): the sums run along keys, and few rows keep the longest length cheap.
      const attention_case c = family_case(base, hi, x.dist, mask_kind::m_none, ctx.decode());
      const std::string label = fmt::format("dist={}, mask=none, T={}", to_string(x.dist), c.t());
      r.exposed.tried_labels.push_back(label);
      const auto out = measure(ctx, "exposing", c, ctx.base_provider(),
                               fmt::format("{} ({}), S={}, small heads", label, x.why, hi));
      if (!out.failed) continue;
      ctx.trace().back().decision += ": the failure appears only under this family; bisect its length";
      r.exposed.label = label;
      r.exposed.case_id = c.id();
      r.exposed.seq = hi;
      r.exposed.step = out.step;
      base = c;
      r.length = bisect_length(ctx, base, o.seq_lo, o.seq_hi);
      if (r.length.inferred.ran) r.inferred_tile = r.length.inferred;
      r.failure_found = r.length.found;
      break;
    }
  }
  if (!r.failure_found) {
    // A case that passes at every length: the audit's family sweep (every class's probe against
    // its control) instead of stopping at "no failure" -- a finite sentinel or a GQA bug does
    // not show under the case's own inputs.
    tile_shape kt = ctx.tiles();
    if (!kt.known() && !r.inferred_tile.ran) r.inferred_tile = infer_tile(ctx.provider(), base);
    if (!kt.known() && r.inferred_tile.known()) kt = {r.inferred_tile.q, r.inferred_tile.k};
    std::vector<audit_error> errors, refused;  // a refused case is skipped
    r.family_sweep = run_audit_classes(ctx, base, o.seq_hi, true, kt.q, kt.k, errors, refused);
    r.family_sweep_ran = true;
    r.candidates = failing_classes(r.family_sweep);
    if (r.candidates.empty()) r.classification = "no failure";
    else r.classification = r.candidates.size() == 1 ? r.candidates.front() : "ambiguous";
    r.trace = ctx.trace();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

  // 2. Input families at a length that is a multiple of every tile tried (tail tiles quiet),
  // at or past the first failure, and long enough for length-driven classes to show.
  const std::int64_t tile = r.length.tile > 0 ? r.length.tile : 64;
  const std::int64_t mult = std::lcm<std::int64_t>(128, tile);
  const std::int64_t ld = round_up(std::max({r.length.first_failing, 16 * tile, std::int64_t{1024}}), mult);
  r.discrimination_length = ld;

  // FP8 cases: restore each quantization point to high precision, alone and in sets, on the
  // case under test (full heads: outlier channels and scale groups depend on them) at the
  // discrimination length, or at the first failing length if it passes there. When the
  // restoration of some points removes the failure, every later stage runs with them restored:
  // the fp8 points are explained, and the families look for other bugs in the rest of the kernel
  // (fp8 P, for one, breaks the exactness that the constant-V probe relies on).
  if (!active_fp8_points(ctx.base_provider()).empty()) {
    attention_case c = base;
    c.seq = ld;
    auto before = measure(ctx, "fp8", c, ctx.base_provider(), fmt::format("the case under test at S={}", ld));
    if (!before.failed && ld != r.length.first_failing) {
      c.seq = r.length.first_failing;
      before = measure(ctx, "fp8", c, ctx.base_provider(),
                       fmt::format("the case under test at its first failing length S={}", c.seq));
    }
    r.fp8 = separate_fp8_points(ctx, c, before);
    if (r.fp8.ran && !r.fp8.culprit.empty() && r.fp8.verdict != "ambiguous") {
      ctx.rebase(restore_fp8_points(ctx.base_provider(), r.fp8.culprit));
      r.fp8.rest_restored = true;
    }
  } else {
    r.fp8.reason = "the case quantizes no fp8 point";
  }

  // Diffuse rows that exposed the failure are judged where they failed.
  r.families = run_families(ctx, base, ld, tile, r.exposed.label.empty() ? 0 : r.exposed.seq);

  // 3. The case under test itself at that length (small heads), for precision and mechanism.
  attention_case own = reduced_case(base);
  own.seq = ld;
  const auto own_out = measure(ctx, "precision", own, ctx.base_provider(),
                               fmt::format("the case under test at S={}, small heads", ld));

  // 4. Precision bisection on a failing case, best first: the case under test, then families
  // where the rescale is quiet (max-first) or the sums are long (diffuse).
  std::vector<precision_candidate> cands;
  // The families' own cases (run_families), so a family's outcome is the baseline of its re-run.
  auto family = [&](input_dist d) { return family_case(base, ld, d, mask_kind::m_none, ctx.decode()); };
  if (own_out.failed) cands.push_back({own, own_out});
  if (r.families.max_first.failed) cands.push_back({family(input_dist::m_max_first), r.families.max_first});
  if (r.families.diffuse.failed)
    cands.push_back({family_case(base, r.families.diffuse_length, input_dist::m_diffuse, mask_kind::m_none, ctx.decode()),
                     r.families.diffuse});
  r.precision = bisect_precision(ctx, cands);

  // 4c. Split-KV decode: the single-split check and the split/page sweeps, on the failing case.
  if (ctx.decode()) {
    attention_case c = reduced_case(base);
    c.seq = ld;
    probe_outcome before = own_out;
    if (!before.failed) {
      c = base;
      c.seq = r.length.first_failing;
      before = measure(ctx, "decode", c, ctx.base_provider(),
                       fmt::format("the case under test at its first failing length S={}", c.seq));
    }
    r.decode = run_decode_checks(ctx, c, before, ctx.tiles().k, r.families);
    if (r.decode.single_split.ran) r.mechanisms.push_back(r.decode.single_split);
  } else {
    r.decode.reason = "the case does not run as split-KV decode";
  }

  // 5. Disable the mechanism: one key tile, on a failing case short enough to be one tile.
  {
    std::vector<std::pair<attention_case, std::string>> tries{{own, "case under test"}};
    if (r.families.rescale_stress.failed) tries.push_back({family(input_dist::m_rescale_stress), "rescale-stress"});
    for (auto& [c, label] : tries) {
      c.seq = std::min<std::int64_t>(ld, 4096);
      const auto before = measure(ctx, "mechanism", c, ctx.base_provider(),
                                  fmt::format("{} at S={} (baseline of the one-key-tile check)", label, c.seq));
      if (!before.failed || before.nan) continue;
      r.mechanisms.push_back(check_one_key_tile(ctx, c, before.error));
      if (!ctx.decode()) r.mechanisms.push_back(check_forced_rescale(ctx, c, before.error));
      break;
    }
  }

  // 6. With a precision culprit found, the rescale contrast again with it upgraded.
  probe_outcome rs_fixed, mf_fixed, fl_fixed;
  const bool refix = !r.precision.culprit.empty();
  if (refix) {
    const auto po = with_states_f64(ctx.base_provider(), r.precision.culprit);
    rs_fixed = measure(ctx, "family", family(input_dist::m_rescale_stress), po, "dist=rescale-stress, culprit upgraded");
    mf_fixed = measure(ctx, "family", family(input_dist::m_max_first), po, "dist=max-first, culprit upgraded");
    fl_fixed = measure(ctx, "family", family(input_dist::m_flat), po, "dist=flat, culprit upgraded");
  }

  classification_inputs in;
  in.length = &r.length;
  in.families = &r.families;
  in.precision = &r.precision;
  in.mechanisms = &r.mechanisms;
  in.state_knobs = ctx.state_knobs();
  in.fp8 = &r.fp8;
  in.decode = &r.decode;
  // Evidence from the contrast without the upgrade counts as well; the upgraded re-run only adds.
  const bool plain_rescale =
      r.families.rescale_stress.failed && !r.families.max_first.failed && !r.families.flat.failed;
  if (refix && !plain_rescale) {
    in.rescale_stress_fixed = &rs_fixed;
    in.max_first_fixed = &mf_fixed;
    in.flat_fixed = &fl_fixed;
  }
  r.classes = classify(in);
  r.classification = classification_of(true, r.classes);
  for (const auto& c : r.classes)
    if (c.verdict == "supported") r.candidates.push_back(c.name);
  r.trace = ctx.trace();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace numprobe::probes
