#include "probes/bisect/bisect_decode.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace numprobe::probes {
namespace {

std::int64_t knob_int(const provider_options& po, const std::string& name, std::int64_t fallback) {
  const auto it = po.knobs.find(name);
  if (it == po.knobs.end()) return fallback;
  try {
    return std::stoll(it->second);
  } catch (...) {
    return fallback;
  }
}

provider_options with_splits(const provider_options& po, std::int64_t n) {
  provider_options o = po;
  o.knobs.erase("split-size");
  o.knobs["splits"] = std::to_string(n);
  return o;
}

provider_options with_page(const provider_options& po, std::int64_t p) {
  provider_options o = po;
  o.knobs["page-size"] = std::to_string(p);
  return o;
}

bool passes(const probe_outcome& o) { return o.ran && !o.failed; }

}  // namespace

decode_checks run_decode_checks(bisect_context& ctx, const attention_case& c, const probe_outcome& before,
                                std::int64_t tile_k, const family_evidence& fam) {
  decode_checks r;
  const auto& po = ctx.base_provider();
  if (!begin_recheck(r, c, before, ctx.decode() ? "" : "the case does not run as split-KV decode")) return r;
  r.splits = po.knobs.count("split-size") ? 0 : knob_int(po, "splits", 4);
  r.page_size = knob_int(po, "page-size", 16);

  // Single split: the merge sees one (O, LSE) pair and is an identity.
  r.single_split.name = "single split";
  r.single_split.before = before.error;
  if (r.splits == 1) {
    r.single_split.note = "the case already runs one split";
  } else {
    const auto o = measure(ctx, "mechanism", c, with_splits(po, 1), "one split (splits=1): no merge");
    r.single_split.ran = true;
    r.single_split.after = o.error;
    r.single_split.removes = passes(o);
    ctx.trace().back().decision = r.single_split.removes ? "passes: the split/merge carries the error"
                                                         : "still fails: not the split/merge";
  }

  // Split count sweep at the failing length.
  bool any_pass = false, any_fail = false;
  for (std::int64_t n : {1, 2, 4, 8, 16}) {
    const auto o = measure(ctx, "decode", c, with_splits(po, n), fmt::format("splits={}", n));
    r.split_sweep.push_back({n, o});
    (o.failed ? any_fail : any_pass) = true;
  }
  r.split_dependent = any_pass && any_fail;
  ctx.trace().back().decision += r.split_dependent ? "; the failure depends on the split count"
                                                   : "; the split count does not change pass/fail";

  // Page size sweep at the failing length (the block table and page order change with it).
  any_pass = any_fail = false;
  for (std::int64_t p : {1, 16, 64, 256}) {
    const auto o = measure(ctx, "decode", c, with_page(po, p), fmt::format("page-size={}", p));
    r.page_sweep.push_back({p, o});
    (o.failed ? any_fail : any_pass) = true;
  }
  r.page_dependent = any_pass && any_fail;
  ctx.trace().back().decision += r.page_dependent ? "; the failure depends on the page size"
                                                  : "; the page size does not change pass/fail";

  // Lengths around a multiple of the page size (and of the key tile, when they differ).
  const std::int64_t P = r.page_size;
  const std::int64_t k = std::max<std::int64_t>(2, c.seq / std::max<std::int64_t>(P, tile_k));
  const std::int64_t base = k * std::max<std::int64_t>(P, tile_k);
  for (std::int64_t s : {base - 1, base, base + 1}) {
    attention_case e = c;
    e.seq = s;
    const auto o = measure(ctx, "decode", e, po, fmt::format("S={} (mod page {} = {}, mod tile {} = {})", s, P,
                                                              s % P, tile_k, s % tile_k));
    r.page_edges.push_back({s, o});
  }

  // Naming the merge fault from the evidence.
  r.all_empty_nan = fam.masked_rows.ran && fam.masked_rows.nan > 0 && fam.normal.ran && fam.normal.nan == 0;
  const bool edge_tile_pattern = r.page_edges.size() == 3 && r.page_edges[0].outcome.failed &&
                                 !r.page_edges[1].outcome.failed && r.page_edges[2].outcome.failed;
  // The LSE of the failing case: a merge that mixes LSE bases is off by (log2(e) - 1) * LSE,
  // about 0.44 * ln(S) >= 1 at S >= 10, while a healthy fp32 merge is off by ~1e-6 * |LSE|.
  const double lse_err = before.step > 0 ? ctx.trace()[before.step - 1].lse_max_abs : 0.0;
  if (r.all_empty_nan) {
    r.merge_fault = "merge-nan-empty";
    r.text = fmt::format("merge of all-empty splits: rows with no visible key give NaN/Inf x{} (exp(-inf - -inf) "
                         "in the LSE merge) while rows with keys are clean",
                         fam.masked_rows.nan);
  } else if (r.single_split.removes && r.split_dependent && lse_err > 0.1) {
    r.merge_fault = "lse-base2-merge";
    r.text = fmt::format("the LSE merge: one split (no merge) removes the failure, and the merged LSE is off by "
                         "{:.3g} (splits write LSE in one base, the merge reads another)", lse_err);
  } else if (r.single_split.removes && r.split_dependent) {
    r.merge_fault = "merge";
    r.text = "the split merge: one split (no merge) removes the failure, and it depends on the split count";
  } else if (edge_tile_pattern && !r.single_split.removes) {
    r.merge_fault = "split-tail-drop";
    r.text = fmt::format("the split holding the sequence end drops its partial tail tile: S={} passes, S={} and "
                         "S={} fail, and one split does not help",
                         r.page_edges[1].value, r.page_edges[0].value, r.page_edges[2].value);
  } else {
    r.text = "neither the split count nor the page size explains the failure";
  }
  return r;
}

}  // namespace numprobe::probes
