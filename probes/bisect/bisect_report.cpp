// JSON and Markdown forms of a bisect result (see bisect.hpp).
#include <fmt/format.h>

#include "probes/bisect/bisect.hpp"

namespace numprobe::probes {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

const char* state_meaning(const std::string& s) {
  if (s == "l") return "running sum l";
  if (s == "o") return "output accumulator O";
  if (s == "m") return "running max m";
  if (s == "s") return "scores S";
  if (s == "p") return "probabilities P";
  return "input";
}

nlohmann::json outcome_json(const probe_outcome& o) {
  return {{"gate_value", json_number(o.error)}, {"rel_rms", json_number(o.rel_rms)},
          {"ratio_to_naive", json_number(o.ratio)}, {"nan_inf", o.nan}, {"failed", o.failed}, {"step", o.step}};
}

nlohmann::json fp8_points_json(const fp8_points_result& x) {
  nlohmann::json j = {{"ran", x.ran}, {"reason", x.reason}, {"active", x.active}};
  if (!x.ran) return j;
  j["case"] = x.case_id;
  j["seq"] = x.seq;
  j["before"] = outcome_json(x.before);
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& e : x.restorations) {
    auto o = outcome_json(e.outcome);
    o["restored"] = e.points;
    o["change"] = e.change;
    o["removes_failure"] = e.removes;
    rs.push_back(o);
  }
  j["restorations"] = rs;
  j["verdict"] = x.verdict;
  j["culprit"] = x.culprit;
  j["text"] = x.text;
  j["later_stages_restored"] = x.rest_restored;
  return j;
}

nlohmann::json decode_json(const decode_checks& d) {
  nlohmann::json j = {{"ran", d.ran}, {"reason", d.reason}};
  if (!d.ran) return j;
  auto sweep = [](const std::vector<decode_sweep_point>& v, const char* key) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& p : v) {
      auto o = outcome_json(p.outcome);
      o[key] = p.value;
      a.push_back(o);
    }
    return a;
  };
  j["case"] = d.case_id;
  j["seq"] = d.seq;
  j["splits"] = d.splits;
  j["page_size"] = d.page_size;
  j["single_split"] = {{"ran", d.single_split.ran}, {"removes_error", d.single_split.removes},
                       {"before", json_number(d.single_split.before)}, {"after", json_number(d.single_split.after)},
                       {"note", d.single_split.note}};
  j["split_sweep"] = sweep(d.split_sweep, "splits");
  j["page_sweep"] = sweep(d.page_sweep, "page_size");
  j["page_edges"] = sweep(d.page_edges, "seq");
  j["split_dependent"] = d.split_dependent;
  j["page_dependent"] = d.page_dependent;
  j["all_empty_nan"] = d.all_empty_nan;
  j["merge_fault"] = d.merge_fault.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.merge_fault);
  j["text"] = d.text;
  return j;
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
  if (r.fp8.ran && !r.fp8.culprit.empty() && (r.fp8.verdict == "one" || r.fp8.verdict == "all")) return r.fp8.text;
  if (r.decode.ran && !r.decode.merge_fault.empty())
    return fmt::format("decode {}: {}", r.decode.merge_fault, r.decode.text);
  if (r.classification != "unclassified" && r.classification != "ambiguous")
    return fmt::format("mechanism: {}", r.classification);
  return "not localized to one state or mechanism";
}

nlohmann::json to_json(const bisect_result& r, bool with_seconds) {
  nlohmann::json j;
  j["backend"] = {{"name", r.provider}, {"metadata", r.provider_metadata}};
  j["base_case"] = r.base_case;
  j["bounds"] = r.bounds;
  j["failure_found"] = r.failure_found;
  // The family under which the failure appeared when the case under test held at every length.
  j["exposed_by"] = r.exposed.label.empty()
                        ? nlohmann::json(nullptr)
                        : nlohmann::json{{"family", r.exposed.label}, {"case", r.exposed.case_id},
                                         {"seq", r.exposed.seq}, {"step", r.exposed.step}};
  j["exposing_families_tried"] = r.exposed.tried_labels;
  j["classification"] = r.classification;
  j["candidates"] = r.candidates;
  if (!r.precision.culprit.empty())
    j["culprit"] = {{"kind", "state"}, {"states", r.precision.culprit}, {"text", culprit_text(r)}};
  else if (r.failure_found && r.fp8.ran && !r.fp8.culprit.empty() && (r.fp8.verdict == "one" || r.fp8.verdict == "all"))
    j["culprit"] = {{"kind", "fp8_point"}, {"points", r.fp8.culprit}, {"text", culprit_text(r)}};
  else if (r.failure_found && r.decode.ran && !r.decode.merge_fault.empty())
    j["culprit"] = {{"kind", "decode_merge"}, {"fault", r.decode.merge_fault}, {"text", culprit_text(r)}};
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
  j["inferred_tile"] = to_json(r.inferred_tile);
  if (!with_seconds) j["inferred_tile"].erase("seconds");
  j["discrimination_length"] = r.discrimination_length;
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : r.classes)
    classes.push_back({{"class", c.name}, {"verdict", c.verdict}, {"for", c.evidence_for},
                       {"against", c.evidence_against}});
  j["classes"] = classes;
  if (r.family_sweep_ran) {
    nlohmann::json sweep = nlohmann::json::array();
    for (const auto& c : r.family_sweep) sweep.push_back(to_json(c));
    j["family_sweep"] = sweep;
  }
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
  j["fp8_points"] = fp8_points_json(r.fp8);
  j["decode"] = decode_json(r.decode);
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

}  // namespace numprobe::probes
