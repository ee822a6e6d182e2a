// The class sweep of `numprobe audit`: every bug class of NUMERICS.md in order, each probed by
// its function in audit_*_classes.cpp / audit_fp8_class.cpp (declared in audit_kit.hpp).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>
#include <string>

#include "probes/classes/audit_classes.hpp"
#include "probes/classes/audit_kit.hpp"
#include "probes/classes/bisect_fp8.hpp"

namespace numprobe::probes {

namespace {

// A class whose evidence is missing: not-applicable when the kernel refused every case that
// did not run (it declares the feature unsupported), inconclusive when any crashed; either
// way the evidence says which cases did not run and why.
void settle_unjudged(audit_class& k, const std::vector<audit_error>& errors,
                     const std::vector<audit_error>& refusals) {
  if (k.verdict != "inconclusive") {
    // Judged on what ran: say what did not.
    std::size_t crashed = 0, refused = 0;
    std::set<std::string> why;
    for (const auto& e : errors) crashed += e.klass == k.name;
    for (const auto& e : refusals)
      if (e.klass == k.name) {
        ++refused;
        why.insert(e.message);
      }
    std::string reasons;
    for (const auto& w : why) reasons += (reasons.empty() ? "" : "; ") + w;
    if (refused)
      k.evidence.push_back(fmt::format("judged without {} case(s) the kernel declares unsupported ({})", refused, reasons));
    if (crashed) k.evidence.push_back(fmt::format("judged without {} case(s) that failed to run (see errors)", crashed));
    return;
  }
  std::vector<std::string> lines;
  std::set<std::string> reasons;
  std::size_t crashed = 0, interrupted = 0;
  for (const auto& e : errors)
    if (e.klass == k.name) {
      ++crashed;
      if (e.message == audit_kit::k_interrupted_case) ++interrupted;
      else lines.push_back(fmt::format("did not run: {}: {}", e.case_id, e.message));
    }
  if (interrupted) lines.push_back(fmt::format("did not run: {} case(s), {}", interrupted, audit_kit::k_interrupted_case));
  for (const auto& e : refusals)
    if (e.klass == k.name) {
      reasons.insert(e.message);
      lines.push_back(fmt::format("refused by the kernel: {}: {}", e.case_id, e.message));
    }
  std::string why;
  for (const auto& r : reasons) why += (why.empty() ? "" : "; ") + r;
  if (crashed == 0 && !reasons.empty()) {
    k.verdict = "not-applicable";
    lines.insert(lines.begin(), fmt::format("not applicable: the kernel declares these cases unsupported ({})", why));
  } else if (crashed == 0 && reasons.empty()) {
    lines.insert(lines.begin(), "inconclusive: every case ran, but the controls break the bound too, so no contrast "
                                "can be seen");
  } else {
    lines.insert(lines.begin(), fmt::format("inconclusive: no discriminating probe was measured with its control "
                                            "({} case(s) failed to run{})", crashed,
                                            reasons.empty() ? "" : fmt::format(", {} refused", reasons.size())));
  }
  k.evidence.insert(k.evidence.begin(), lines.begin(), lines.end());
}

}  // namespace

std::vector<audit_class> run_audit_classes(bisect_context& ctx, const attention_case& base, std::int64_t seq_hi,
                                           bool quick, std::int64_t tile_q, std::int64_t tile_k,
                                           std::vector<audit_error>& errors,
                                           std::vector<audit_error>& refusals,
                                           const std::function<bool(std::size_t)>& only) {
  using namespace audit_kit;
  const auto& under_test = ctx.base_provider();
  const auto fp8_points = active_fp8_points(under_test);
  runner r(ctx, errors, refusals, fp8_points.empty() ? under_test : restore_fp8_points(under_test, fp8_points));
  layout L;
  L.tile_q = tile_q;
  L.tile_k = tile_k;
  L.quick = quick;
  L.decode = ctx.decode();
  L.seq_hi = seq_hi;
  L.decode_queries = std::clamp<std::int64_t>(base.queries, 1, 8);
  using class_probe = audit_class (*)(runner&, const attention_case&, const layout&);
  static constexpr class_probe k_probes[] = {empty_split, finite_sentinel, rescale_frame, accumulation,
                                             index_threshold, mask_geometry, tail_tile, gqa_mapping,
                                             fp8_scaling, nullptr /* sub-byte formats */, wavefront};
  static_assert(std::size(k_probes) == 11);
  std::vector<audit_class> out;
  for (std::size_t i = 0; i < std::size(k_probes); ++i) {
    if (!k_probes[i]) {
      out.push_back({"sub-byte formats", "not-applicable",
                     {"attention kernels take no sub-byte (fp4/fp6/int4) inputs here; audit quantizers with `numprobe quant`"},
                     {}, {}});
    } else if (only && !only(i)) {
      out.push_back({"(another rank's class)", "not-applicable", {}, {}, {}});
    } else {
      out.push_back(k_probes[i](r, base, L));
    }
  }
  for (auto& k : out) settle_unjudged(k, errors, refusals);
  return out;
}

std::size_t audit_class_count() { return 11; }

audit_baseline run_audit_baseline(bisect_context& ctx, const attention_case& base, std::int64_t tile_q,
                                  std::int64_t tile_k, std::vector<audit_error>& errors,
                                  std::vector<audit_error>& refusals) {
  using namespace audit_kit;
  const auto& under_test = ctx.base_provider();
  const auto fp8_points = active_fp8_points(under_test);
  // The baseline runs the kernel as configured (fp8 points included): it is the case under test.
  runner r(ctx, errors, refusals, under_test);
  layout L;
  L.tile_q = tile_q;
  L.tile_k = tile_k;
  L.decode = ctx.decode();
  L.decode_queries = std::clamp<std::int64_t>(base.queries, 1, 8);
  const std::int64_t b = L.tile_or(64);
  // Tile-crossing lengths: a partial tail tile, a whole number of tiles, and a half tile over.
  const std::int64_t lens[] = {2 * b + 1, L.quiet(1024), L.quiet(2048) + b / 2 + 1};
  audit_class k{"baseline", "pass", {}, {}, {}};
  audit_baseline out;
  std::size_t measured_n = 0, breaks = 0;
  const bound& bd = ctx.bounds().front();
  for (const std::int64_t s : lens) {
    attention_case c = family(base, L, s, base.dist);
    c.mask = base.mask == mask_kind::m_window || base.mask == mask_kind::m_ranges ? mask_kind::m_causal : base.mask;
    if (c.mask == mask_kind::m_causal && !L.decode) c.queries = 0;
    const auto m = r.run(k, c, fmt::format("baseline: the case under test at S={}", s), &under_test);
    audit_baseline_point p;
    p.case_id = m.case_id;
    p.seq = s;
    if (!m.ok()) {
      p.verdict = m.refused ? "unsupported" : "error";
      p.message = m.message;
    } else {
      ++measured_n;
      p.value = m.step.gate_value;
      p.step = m.step.index;
      p.verdict = m.nonfinite() ? "NaN/Inf" : (m.failed() ? "breaks" : "holds");
      if (m.failed()) {
        ++breaks;
        if (out.worst_case.empty() || m.nonfinite() || !(p.value <= out.worst_value)) {
          out.worst_case = m.case_id;
          out.worst_value = p.value;
        }
      }
    }
    out.points.push_back(p);
  }
  out.verdict = measured_n == 0 ? "inconclusive" : (breaks ? "fail" : "pass");
  out.wrong_everywhere = measured_n > 0 && breaks == measured_n;
  if (out.wrong_everywhere && std::isfinite(out.worst_value) &&
      (bd.op == bound_op::m_le || bd.op == bound_op::m_lt)) {
    // Judged relative to its own error: a probe counts as failing when it exceeds twice the
    // worst baseline error, so the classes still name where the error comes from.
    bound rel = bd;
    // Three significant digits, rounded up: a readable limit, never below twice the worst.
    const double twice = 2.0 * out.worst_value;
    const double step = std::pow(10.0, std::floor(std::log10(twice)) - 2.0);
    rel.value = std::ceil(twice / step) * step;
    rel.basis = fmt::format("twice the baseline's worst {} {:.3g}: the kernel breaks {} at every baseline length",
                            bd.metric, out.worst_value, bd.text());
    out.relative = rel;
  }
  return out;
}

std::vector<std::string> failing_classes(const std::vector<audit_class>& classes) {
  std::vector<std::string> out;
  for (const auto& c : classes)
    if (c.verdict == "fail") out.push_back(c.name);
  return out;
}

nlohmann::json to_json(const audit_class& c) {
  return {{"name", c.name}, {"verdict", c.verdict}, {"evidence", c.evidence}, {"cases", c.cases}, {"steps", c.steps}};
}

nlohmann::json to_json(const audit_baseline& b) {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : b.points) {
    nlohmann::json j = {{"case", p.case_id}, {"seq", p.seq}, {"verdict", p.verdict}, {"step", p.step}};
    if (p.step >= 0) j["value"] = std::isfinite(p.value) ? nlohmann::json(p.value) : nlohmann::json(nullptr);
    if (!p.message.empty()) j["message"] = p.message;
    pts.push_back(std::move(j));
  }
  nlohmann::json j = {{"verdict", b.verdict}, {"wrong_everywhere", b.wrong_everywhere}, {"points", pts}};
  if (!b.worst_case.empty())
    j["worst"] = {{"case", b.worst_case},
                  {"value", std::isfinite(b.worst_value) ? nlohmann::json(b.worst_value) : nlohmann::json(nullptr)}};
  if (!b.relative_bound.empty()) j["relative_bound"] = b.relative_bound;
  return j;
}

}  // namespace numprobe::probes
