#include "probes/classes/bisect_fp8.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "numprobe/formats/format.hpp"

namespace numprobe::probes {
namespace {

std::string join_plus(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : "+") + s;
  return out;
}

std::string knob(const provider_options& po, const std::string& name, const std::string& fallback) {
  const auto it = po.knobs.find(name);
  return it == po.knobs.end() ? fallback : it->second;
}

void drop_fault(provider_options& po, const std::string& f) {
  po.faults.erase(std::remove(po.faults.begin(), po.faults.end(), f), po.faults.end());
}

std::string restoration_text(const std::string& point) {
  if (point == "kv") return "K/V in the input dtype (no fp8 cache)";
  if (point == "p") return "P unquantized";
  return "accumulator promoted to fp32 every key tile";
}

}  // namespace

std::vector<std::string> active_fp8_points(const provider_options& po) {
  std::vector<std::string> out;
  if (po.backend != "emu") return out;  // the knobs belong to the emulator
  if (po.knobs.count("kv-format")) out.push_back("kv");
  if (po.knobs.count("p-format")) out.push_back("p");
  if (po.knobs.count("acc-promote")) out.push_back("acc");
  return out;
}

bound default_accuracy_bound(const provider_options& po) {
  if (active_fp8_points(po).empty()) return default_bisect_bound();
  // fp8 points quantize inside the kernel, where the reference cannot follow: the baseline ratio
  // is meaningless, and the bound is the format's own rounding instead.
  double u = 0.0;
  for (const char* knob : {"kv-format", "p-format"})
    if (po.knobs.count(knob)) u = std::max(u, formats::unit_roundoff(formats::parse_format(po.knobs.at(knob), knob)));
  if (u == 0.0) u = formats::unit_roundoff(formats::format_id::m_e4m3fn);
  bound b = parse_bound(fmt::format("rel_rms<={:g}", 2.0 * u));
  b.basis = fmt::format("twice the unit roundoff {:g} of the fp8 format K/V or P are quantized to", u);
  return b;
}

provider_options restore_fp8_points(const provider_options& po, const std::vector<std::string>& points) {
  provider_options o = po;
  for (const auto& p : points) {
    if (p == "kv") {
      o.knobs.erase("kv-format");
      o.knobs.erase("kv-scale");
      drop_fault(o, "kv-scale-ignored");
    } else if (p == "p") {
      o.knobs.erase("p-format");
      o.knobs.erase("p-prescale");
      drop_fault(o, "p-no-prescale");
    } else if (p == "acc") {
      o.knobs["acc-promote"] = "1";
      drop_fault(o, "acc-no-promotion");
    }
  }
  return o;
}

std::string fp8_point_meaning(const std::string& point, const provider_options& po) {
  if (point == "kv")
    return fmt::format("K/V cache ({}, scale per {})", knob(po, "kv-format", "?"), knob(po, "kv-scale", "head"));
  if (point == "p")
    return fmt::format("P before P.V ({}, pre-scale {})", knob(po, "p-format", "?"), knob(po, "p-prescale", "1"));
  if (point == "acc")
    return fmt::format("fp8 MMA accumulator (promoted every {} key tiles)", knob(po, "acc-promote", "?"));
  return point;
}

fp8_points_result separate_fp8_points(bisect_context& ctx, const attention_case& c, const probe_outcome& before) {
  fp8_points_result r;
  r.active = active_fp8_points(ctx.base_provider());
  if (!begin_recheck(r, c, before, r.active.empty() ? "the case quantizes no fp8 point" : "")) return r;
  r.before = before;
  auto attempt = [&](const std::vector<std::string>& pts) {
    std::string change;
    for (const auto& p : pts) change += (change.empty() ? "" : "; ") + restoration_text(p);
    fp8_restoration x;
    x.points = pts;
    x.change = change;
    x.outcome = measure(ctx, "fp8", c, restore_fp8_points(ctx.base_provider(), pts),
                        fmt::format("fp8 point{} {} restored: {}", pts.size() > 1 ? "s" : "", join_plus(pts), change));
    // Under the bound and at least half the error, as in precision bisection: a borderline
    // case must not be tipped under the bound by restoring an unrelated point.
    x.removes = !x.outcome.failed && (before.nan || x.outcome.rel_rms <= 0.5 * before.rel_rms);
    ctx.trace().back().decision = x.removes ? "passes: this restoration removes the failure" : "still fails";
    r.restorations.push_back(x);
    return x.removes;
  };

  std::vector<std::string> single;
  for (const auto& p : r.active)
    if (attempt({p})) single.push_back(p);
  if (single.size() == 1) {
    r.verdict = "one";
    r.culprit = single;
  } else if (single.size() > 1) {
    r.verdict = "ambiguous";
    r.culprit = single;
  } else if (r.active.size() == 1) {
    r.verdict = "none";
  } else {
    // No point alone: the smallest set whose restoration removes it (3 points: pairs, then all).
    std::vector<std::string> found;
    if (r.active.size() == 3) {
      for (std::size_t i = 0; i < 3 && found.empty(); ++i) {
        std::vector<std::string> pair;
        for (std::size_t j = 0; j < 3; ++j)
          if (j != i) pair.push_back(r.active[j]);
        if (attempt(pair)) found = pair;
      }
    }
    if (found.empty() && attempt(r.active)) found = r.active;
    r.verdict = found.empty() ? "none" : "all";
    r.culprit = found;
  }
  if (r.verdict == "none") {
    // Nothing removes the failure, but a restoration may remove most of the error: a second
    // cause is left (two faults at once). Points whose restoration alone cuts the error 10x or
    // clears the NaN are named as a partial culprit; the rest of bisect looks for the other cause.
    auto cuts = [&](const probe_outcome& o) {
      if (before.nan) return o.nan == 0;
      return o.nan == 0 && o.rel_rms <= 0.1 * before.rel_rms;
    };
    for (const auto& x : r.restorations)
      if (x.points.size() == 1 && cuts(x.outcome)) r.culprit.push_back(x.points.front());
    if (!r.culprit.empty()) r.verdict = "partial";
  }

  const auto& po = ctx.base_provider();
  if (r.verdict == "one") {
    r.text = fmt::format("fp8 point {}: restoring it alone removes the failure",
                         fp8_point_meaning(r.culprit.front(), po));
  } else if (r.verdict == "all") {
    std::vector<std::string> m;
    for (const auto& p : r.culprit) m.push_back(fp8_point_meaning(p, po));
    r.text = fmt::format("fp8 points {} together: no single restoration removes the failure, all of them do",
                         fmt::format("{}", fmt::join(m, " and ")));
  } else if (r.verdict == "partial") {
    std::vector<std::string> m;
    for (const auto& p : r.culprit) m.push_back(fp8_point_meaning(p, po));
    r.text = fmt::format("fp8 point{} {} carr{} most of the error (restoring it cuts the error 10x or more) "
                         "but the failure remains: another cause as well",
                         m.size() > 1 ? "s" : "", fmt::format("{}", fmt::join(m, " and ")), m.size() > 1 ? "y" : "ies");
  } else if (r.verdict == "ambiguous") {
    r.text = fmt::format("ambiguous: restoring any of {} alone removes the failure", join_plus(r.culprit));
  } else {
    r.text = "restoring every fp8 point leaves the failure: not an fp8 quantization failure";
  }
  ctx.trace().back().decision += "; " + r.text;
  return r;
}

}  // namespace numprobe::probes
