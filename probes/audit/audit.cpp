#include "probes/audit/audit.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "probes/classes/bisect_fp8.hpp"

namespace numprobe::probes {

namespace {

// The audit on `ctx`. `only` (the --mpi share) takes item 0 for the baseline and 1..N for the
// classes; `inferred`, when given, is the tile inference already run for this audit.
audit_result audit_on(bisect_context& ctx, const audit_options& o, const std::function<bool(std::size_t)>& only,
                      const tile_inference* inferred) {
  audit_result r;
  for (const auto& b : ctx.bounds()) r.bounds.push_back(b.text());
  r.provider = ctx.provider_name();
  r.provider_metadata = ctx.provider_metadata();
  attention_case base = o.base;
  base.seq = std::min(base.seq, o.seq_hi);
  base.validate();
  r.base_case = base.id();

  // The kernel's tiles: its own, else inferred, else every common tile size.
  r.tiles = ctx.tiles();
  if (r.tiles.known()) {
    r.tile_q = r.tiles.q;
    r.tile_k = r.tiles.k;
    r.tile_source = o.provider.tile ? "--tile" : "kernel";
  } else {
    try {
      r.inferred = inferred ? *inferred : infer_tile(ctx.provider(), base);
    } catch (const error&) {
      if (!(o.stop && o.stop())) throw;  // interrupted: the cases are skipped below, the tile stays unknown
    }
    if (r.inferred.known()) {
      r.tile_k = r.inferred.k;
      r.tile_q = r.inferred.q;
      r.tile_source = "inferred";
    } else {
      r.tile_source = "common sizes";
    }
  }
  if (!only || only(0)) r.baseline = run_audit_baseline(ctx, base, r.tile_q, r.tile_k, r.errors, r.unsupported);
  const std::function<bool(std::size_t)> classes_only =
      only ? std::function<bool(std::size_t)>([&only](std::size_t i) { return only(i + 1); }) : nullptr;
  r.classes = run_audit_classes(ctx, base, o.seq_hi, o.quick, r.tile_q, r.tile_k, r.errors, r.unsupported,
                                classes_only);
  if (r.baseline.relative && failing_classes(r.classes).empty()) {
    // Wrong everywhere, and no class stands out against the absolute bound (its controls break
    // it too): judge the classes again against twice the kernel's own error level, so that a
    // mechanism whose probe stands out above it is still named.
    std::vector<bound> rel = ctx.bounds();
    rel.front() = *r.baseline.relative;
    ctx.rebound(std::move(rel));
    r.baseline.relative_bound = r.baseline.relative->text();
    std::vector<audit_error> errors, refused;
    r.classes = run_audit_classes(ctx, base, o.seq_hi, o.quick, r.tile_q, r.tile_k, errors, refused, classes_only);
    r.errors.insert(r.errors.end(), errors.begin(), errors.end());
    r.unsupported.insert(r.unsupported.end(), refused.begin(), refused.end());
  }
  r.healthy = r.baseline.verdict == "pass" && failing_classes(r.classes).empty() && r.errors.empty();
  r.trace = ctx.trace();
  r.seq_asked = o.seq_hi;
  for (const auto& s : r.trace) r.seq_longest = std::max(r.seq_longest, s.seq);
  return r;
}

}  // namespace

audit_result run_audit(const audit_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<bound> bounds =
      o.bounds.empty() ? std::vector<bound>{default_accuracy_bound(o.provider)} : o.bounds;
  auto context = [&] {
    auto ctx = std::make_unique<bisect_context>(o.provider, bounds, o.probe);
    ctx->stop = o.stop;
    return ctx;
  };
  audit_result r;
  if (!o.share.split()) {
    auto ctx = context();
    ctx->on_step = o.on_step;
    r = audit_on(*ctx, o, nullptr, nullptr);
  } else {
    // Each rank measures its share, recording every outcome; then every rank judges the whole
    // audit from all ranks' outcomes, as one process would have (a case no rank recorded, as
    // in a second judgement against the kernel's own error level, is measured then).
    auto mine = context();
    mine->on_step = o.on_step;
    mine->record();
    tile_inference inferred;
    const auto parts = o.share.exchange([&] {
      inferred = audit_on(*mine, o, [&o](std::size_t i) { return o.share.mine(i); }, nullptr).inferred;
      return mine->recorded();
    });
    auto all = context();
    for (std::size_t k = 0; k < parts.size(); ++k)
      all->add_recorded(parts[k], fmt::format("audit --mpi: rank {}'s measurements", k));
    r = audit_on(*all, o, nullptr, &inferred);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

int audit_exit_code(const audit_result& r) {
  if (!failing_classes(r.classes).empty() || r.baseline.verdict == "fail") return 1;
  for (const auto& c : r.classes)
    if (c.verdict == "inconclusive")
      for (const auto& e : r.errors)
        if (e.klass == c.name) return 3;
  if (r.baseline.verdict == "inconclusive" && !r.errors.empty()) return 3;
  // Nothing judged, nothing crashed: the kernel refused every case these flags ask for. No
  // evidence is no pass: an input error (the case flags name what the kernel lacks).
  std::size_t judged = 0;
  for (const auto& c : r.classes) judged += c.verdict == "pass" || c.verdict == "fail";
  if (judged == 0 && r.baseline.verdict == "inconclusive") return 2;
  return 0;
}

nlohmann::json to_json(const audit_result& r, bool with_seconds) {
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : r.classes) classes.push_back(to_json(c));
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : r.errors) errors.push_back({{"class", e.klass}, {"case", e.case_id}, {"error", e.message}});
  nlohmann::json unsupported = nlohmann::json::array();
  for (const auto& e : r.unsupported)
    unsupported.push_back({{"class", e.klass}, {"case", e.case_id}, {"reason", e.message}});
  nlohmann::json trace = nlohmann::json::array();
  for (const auto& s : r.trace) trace.push_back(to_json(s, with_seconds));
  nlohmann::json j = {{"provider", r.provider},
                      {"provider_metadata", r.provider_metadata},
                      {"case", r.base_case},
                      {"bounds", r.bounds},
                      {"tile", {{"q", r.tile_q}, {"k", r.tile_k}, {"source", r.tile_source}}},
                      {"inferred_tile", to_json(r.inferred)},
                      {"baseline", to_json(r.baseline)},
                      {"classes", classes},
                      {"failing", failing_classes(r.classes)},
                      {"errors", errors},
                      {"unsupported", unsupported},
                      {"healthy", r.healthy},
                      {"seq", {{"asked", r.seq_asked}, {"longest", r.seq_longest}}},
                      {"trace", trace}};
  if (with_seconds) j["seconds"] = r.seconds;
  return j;
}

namespace {

// What the terminal shows: the backend, the tile and how it is known, a verdict per class, the
// evidence (failing classes first), the errors and the overall verdict. The case trace is the
// check's trace (`audit --trace` prints it).
void add_view(const audit_result& r, result::check_result& out) {
  result::view_builder v(out);
  out.view_shows_gates = true;  // a verdict per class: the gates, in the probe's words
  const std::string tile = r.tile_k > 0 ? fmt::format("{}x{} ({})", r.tile_q > 0 ? std::to_string(r.tile_q) : "?",
                                                      r.tile_k, r.tile_source)
                                        : "unknown: probes cross every common tile size (16..256)";
  v.line(fmt::format("backend   {}", r.provider));
  v.line(fmt::format("case      {}", r.base_case));
  v.line(fmt::format("bound     {}", r.bounds.empty() ? "" : r.bounds.front()));
  v.line(fmt::format("tile      {}", tile));
  if (r.inferred.ran) v.line(fmt::format("          inference: {}", tile_text(r.inferred)));
  if (r.seq_longest > r.seq_asked)
    v.line(fmt::format("lengths   up to {} (--seq {} asked less: the probes need lengths that cross the tiles)",
                       r.seq_longest, r.seq_asked));
  auto& t = v.add_table({"class", "verdict", "cases"});
  {
    const auto& b = r.baseline;
    t.rows.push_back({"baseline", b.verdict == "fail" ? "FAIL" : b.verdict, std::to_string(b.points.size())});
  }
  for (const auto& c : r.classes)
    t.rows.push_back({c.name, c.verdict == "fail" ? "FAIL" : c.verdict, std::to_string(c.cases.size())});
  // The baseline: the case under test at tile-crossing lengths, before any contrast.
  v.blank();
  v.line(fmt::format("[{}] baseline{}", r.baseline.verdict == "fail" ? "FAIL" : r.baseline.verdict,
                     r.baseline.wrong_everywhere ? ": the kernel is wrong everywhere" : ""));
  for (const auto& p : r.baseline.points)
    v.line(fmt::format("  - S={}: {}{}", p.seq, p.verdict,
                       p.step >= 0 ? fmt::format(" ({:.3g}) {}", p.value, p.case_id)
                                   : fmt::format(" {}: {}", p.case_id, p.message)));
  if (r.baseline.wrong_everywhere)
    v.line(fmt::format("  - the bound breaks at every length (worst {:.3g}, {}); the classes are judged against {}",
                       r.baseline.worst_value, r.baseline.worst_case,
                       r.baseline.relative_bound.empty() ? std::string("the same bound") : r.baseline.relative_bound));
  // Evidence: failing classes first, then the rest.
  for (const bool failing : {true, false})
    for (const auto& c : r.classes) {
      if ((c.verdict == "fail") != failing) continue;
      v.blank();
      v.line(fmt::format("[{}] {}", failing ? "FAIL" : c.verdict, c.name));
      for (const auto& e : c.evidence) v.line(fmt::format("  {} {}", failing ? "+" : "-", e));
    }
  if (!r.errors.empty()) v.blank();
  for (const auto& e : r.errors) v.line(fmt::format("ERROR  {}  {}: {}", e.klass, e.case_id, e.message));
  if (!r.unsupported.empty())
    v.line(fmt::format("unsupported  {} case(s) refused by the kernel (a declared lack of support, not an error)",
                       r.unsupported.size()));
  const auto failing = failing_classes(r.classes);
  std::string names;
  for (const auto& n : failing) names += (names.empty() ? "" : ", ") + n;
  std::size_t inconclusive = 0, judged = 0;
  for (const auto& c : r.classes) {
    inconclusive += c.verdict == "inconclusive";
    judged += c.verdict == "pass" || c.verdict == "fail";
  }
  std::string verdict;
  if (r.baseline.wrong_everywhere)
    verdict = fmt::format("the kernel is wrong everywhere (baseline worst {:.3g} at {}){}", r.baseline.worst_value,
                          r.baseline.worst_case, failing.empty() ? "" : fmt::format("; {} class(es) fail: {}",
                                                                                    failing.size(), names));
  else if (!failing.empty())
    verdict = fmt::format("{} class(es) fail: {}", failing.size(), names);
  else if (r.baseline.verdict == "fail")
    verdict = "the baseline breaks the bound at some lengths, and no class explains it";
  else if (judged == 0)
    verdict = "no class could be judged: nothing supports a pass";
  else if (inconclusive)
    verdict = fmt::format("no class fails; {} class(es) inconclusive", inconclusive);
  else
    verdict = r.errors.empty() ? "healthy: every judged class passes" : "no class fails, but some cases errored";
  v.blank();
  v.line(fmt::format("verdict   {}", verdict));
  v.line(fmt::format("cases     {}", r.trace.size()));
}

}  // namespace

void fill_result(const audit_result& r, result::check_result& out) {
  out.backend = r.provider;
  out.case_id = r.base_case;
  out.seconds = r.seconds;
  const auto failing = failing_classes(r.classes);
  // An unknown tile is "unknown (common sizes)", not "tile 0x0".
  const std::string tile = r.tile_k > 0 ? fmt::format("tile {}x{} ({})", r.tile_q, r.tile_k, r.tile_source)
                                        : fmt::format("tile unknown (probes laid out for {})", r.tile_source);
  out.message = fmt::format("{}; {}", tile,
                            r.healthy ? "healthy"
                                      : fmt::format("baseline {}{}, {} class(es) fail, {} case(s) errored",
                                                    r.baseline.verdict,
                                                    r.baseline.wrong_everywhere ? " (wrong everywhere)" : "",
                                                    failing.size(), r.errors.size()));
  out.metrics.push_back({"failing_classes", static_cast<double>(failing.size()), "classes", "int"});
  out.metrics.push_back({"errors", static_cast<double>(r.errors.size()), "cases", "int"});
  out.metrics.push_back({"cases", static_cast<double>(r.trace.size()), "cases", "int"});
  out.metrics.push_back({"unsupported", static_cast<double>(r.unsupported.size()), "cases", "int"});
  if (r.baseline.verdict != "inconclusive") {
    // The baseline as a gate: its worst length against the bound (a breach is exit 1).
    double worst = 0.0;
    std::string worst_case = r.base_case;
    for (const auto& p : r.baseline.points)
      if (p.step >= 0 && (!(p.value <= worst))) {
        worst = p.value;
        worst_case = p.case_id;
      }
    out.gates.push_back({r.bounds.empty() ? "baseline" : r.bounds.front(), "baseline", worst,
                         r.baseline.verdict == "pass",
                         r.baseline.wrong_everywhere ? "the kernel breaks its bound at every baseline length"
                                                     : "the case under test at tile-crossing lengths",
                         worst_case});
  }
  for (const auto& c : r.classes)
    if (c.verdict == "pass" || c.verdict == "fail")
      out.gates.push_back({c.name, c.name, c.verdict == "fail" ? 1.0 : 0.0, c.verdict != "fail",
                           c.evidence.empty() ? "" : c.evidence.front(), c.cases.empty() ? r.base_case : c.cases.front()});
  add_view(r, out);
  out.traces.push_back(trace_table(r.trace, "audit cases (rerun one with numprobe attention --case ID)"));
  out.details = to_json(r);
}

}  // namespace numprobe::probes
