// JSON and Markdown forms of a bisect result (see bisect.hpp).
#include <cmath>
#include <fmt/format.h>

#include "probes/bisect.hpp"

namespace numprobe::probes {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.3g}", v);
}

const char* state_meaning(const std::string& s) {
  if (s == "l") return "running sum l";
  if (s == "o") return "output accumulator O";
  if (s == "m") return "running max m";
  if (s == "s") return "scores S";
  if (s == "p") return "probabilities P";
  return "input";
}

}  // namespace

std::string culprit_text(const bisect_result& r) {
  if (!r.failure_found) return "none (no failure)";
  if (!r.precision.culprit.empty()) {
    std::vector<std::string> parts;
    for (const auto& s : r.precision.culprit) parts.push_back(fmt::format("{} ({})", s, state_meaning(s)));
    return fmt::format("state {} held in too low a precision: upgrading it to f64 removes the failure",
                       join(parts, ", "));
  }
  if (r.classification != "unclassified" && r.classification != "ambiguous")
    return fmt::format("mechanism: {}", r.classification);
  return "not localized to one state or mechanism";
}

nlohmann::json to_json(const bisect_step& s, bool with_seconds) {
  nlohmann::json j = {{"step", s.index},          {"stage", s.stage},
                      {"case", s.case_id},        {"change", s.change},
                      {"provider", s.provider},   {"seq", s.seq},
                      {"rows", s.rows},           {"rel_rms", json_number(s.rel_rms)},
                      {"ratio_to_naive", json_number(s.ratio_to_naive)},
                      {"lse_max_abs", json_number(s.lse_max_abs)},
                      {"gate_value", json_number(s.gate_value)},
                      {"nan_inf", s.nan_count},   {"failed", s.failed},
                      {"decision", s.decision}};
  if (with_seconds) j["seconds"] = s.seconds;
  return j;
}

nlohmann::json to_json(const bisect_result& r, bool with_seconds) {
  nlohmann::json j;
  j["backend"] = {{"name", r.provider}, {"metadata", r.provider_metadata}};
  j["base_case"] = r.base_case;
  j["bounds"] = r.bounds;
  j["failure_found"] = r.failure_found;
  j["classification"] = r.classification;
  j["candidates"] = r.candidates;
  if (!r.precision.culprit.empty())
    j["culprit"] = {{"kind", "state"}, {"states", r.precision.culprit}, {"text", culprit_text(r)}};
  else if (r.failure_found && r.candidates.size() == 1)
    j["culprit"] = {{"kind", "mechanism"}, {"class", r.candidates.front()}, {"text", culprit_text(r)}};
  else
    j["culprit"] = nullptr;
  const auto& L = r.length;
  j["first_failing_seq"] = r.failure_found ? nlohmann::json(L.first_failing) : nlohmann::json(nullptr);
  j["last_passing_seq"] = r.failure_found && L.last_passing ? nlohmann::json(L.last_passing) : nlohmann::json(nullptr);
  j["fails_at_lowest"] = L.fails_at_lowest;
  j["tile_aligned"] = L.tile_aligned;
  j["tile"] = {{"B", L.tile}, {"source", L.tile_source}, {"pattern", L.tile_pattern}};
  j["power_of_two_step"] = L.power_of_two_step;
  j["discrimination_length"] = r.discrimination_length;
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : r.classes)
    classes.push_back({{"class", c.name}, {"verdict", c.verdict}, {"for", c.evidence_for},
                       {"against", c.evidence_against}});
  j["classes"] = classes;
  const auto& P = r.precision;
  nlohmann::json prec = {{"ran", P.ran}, {"reason", P.reason}, {"case", P.family_case},
                         {"all_f64_fixes", P.all_f64_fixes}, {"minimal_set", P.culprit},
                         {"single_fixes", P.single_fixes}};
  nlohmann::json curve = nlohmann::json::array();
  for (std::size_t i = 0; i < P.curve_lengths.size(); ++i)
    curve.push_back({{"seq", P.curve_lengths[i]}, {"before", json_number(P.curve_before[i])},
                     {"after", json_number(P.curve_after[i])}});
  prec["curve"] = curve;
  j["precision"] = prec;
  nlohmann::json mech = nlohmann::json::array();
  for (const auto& m : r.mechanisms)
    mech.push_back({{"check", m.name}, {"ran", m.ran}, {"removes_error", m.removes},
                    {"before", json_number(m.before)}, {"after", json_number(m.after)}, {"note", m.note}});
  j["mechanisms"] = mech;
  nlohmann::json trace = nlohmann::json::array();
  for (const auto& s : r.trace) trace.push_back(to_json(s, with_seconds));
  j["trace"] = trace;
  j["steps"] = r.trace.size();
  if (with_seconds) {
    j["seconds"] = r.seconds;
    j["seconds_per_step"] = r.trace.empty() ? 0.0 : r.seconds / static_cast<double>(r.trace.size());
  }
  return j;
}

std::string to_markdown(const bisect_result& r) {
  std::string md = "# numprobe bisect\n\n";
  md += fmt::format("- backend: `{}`\n- case under test: `{}`\n- bound: `{}`\n", r.provider, r.base_case,
                    join(r.bounds, "`, `"));
  md += fmt::format("- **classification: {}**\n", r.classification);
  if (r.candidates.size() > 1) md += fmt::format("- candidates: {}\n", join(r.candidates, ", "));
  md += fmt::format("- culprit: {}\n", culprit_text(r));
  if (r.failure_found) {
    const auto& L = r.length;
    md += fmt::format("- first failing length: {}{}\n", L.first_failing,
                      L.fails_at_lowest ? " (fails at the shortest length tried)"
                                        : fmt::format(" (passes at {})", L.last_passing));
    md += fmt::format("- tile aligned: {} (B={}, {}, pattern {})\n", L.tile_aligned ? "yes" : "no", L.tile,
                      L.tile_source, L.tile_pattern);
  }
  md += fmt::format("- {} steps in {:.1f} s ({:.2f} s per step)\n\n", r.trace.size(), r.seconds,
                    r.trace.empty() ? 0.0 : r.seconds / static_cast<double>(r.trace.size()));
  if (!r.classes.empty()) {
    md += "## Bug classes (NUMERICS.md)\n\n| class | verdict | evidence for | evidence against |\n|---|---|---|---|\n";
    for (const auto& c : r.classes)
      md += fmt::format("| {} | {} | {} | {} |\n", c.name, c.verdict, md_escape(join(c.evidence_for, "; ")),
                        md_escape(join(c.evidence_against, "; ")));
    md += "\n";
  }
  if (!r.precision.curve_lengths.empty()) {
    md += fmt::format("## Precision bisection\n\nMinimal set `{{{}}}` on `{}`.\n\n| seq | before | after |\n|---|---|---|\n",
                      join(r.precision.culprit), r.precision.family_case);
    for (std::size_t i = 0; i < r.precision.curve_lengths.size(); ++i)
      md += fmt::format("| {} | {} | {} |\n", r.precision.curve_lengths[i], num(r.precision.curve_before[i]),
                        num(r.precision.curve_after[i]));
    md += "\n";
  }
  md += "## Trace\n\n| # | stage | change | ratio | rel_rms | NaN | result | decision | s | case |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& s : r.trace)
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} | `{}` |\n", s.index, s.stage,
                      md_escape(s.change), num(s.ratio_to_naive), num(s.rel_rms), s.nan_count,
                      s.failed ? "FAIL" : "pass", md_escape(s.decision), s.seconds, s.case_id);
  return md;
}

}  // namespace numprobe::probes
