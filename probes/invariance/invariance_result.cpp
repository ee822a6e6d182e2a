// The invariance result as JSON and in the result model (issue 30).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cmath>

#include "probes/invariance/invariance_probe.hpp"

namespace numprobe::probes {
namespace {

nlohmann::json first_json(const element_position& p) {
  if (p.row < 0) return nullptr;
  return {{"row", p.row}, {"head", p.head}, {"dim", p.dim}, {"a", result::json_number(p.a)},
          {"b", result::json_number(p.b)}, {"ulp", result::json_number(p.ulp)}};
}

std::string first_text(const element_position& p) {
  if (p.row < 0) return "-";
  return fmt::format("row {} head {} d {}", p.row, p.head, p.dim);
}

std::string ulp_text(const bit_comparison& b) {
  if (b.differing == 0) return "0";
  return std::isfinite(b.max_ulp) ? fmt::format("{:g}", b.max_ulp) : "nonfinite";
}

}  // namespace

nlohmann::json to_json(const invariance_result& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks) {
    nlohmann::json comps = nlohmann::json::array();
    for (const auto& x : c.comparisons)
      comps.push_back({{"label", x.label}, {"cases", {x.case_a, x.case_b}}, {"differing", x.bits.differing},
                       {"compared", x.bits.compared}, {"max_ulp", result::json_number(x.bits.max_ulp)},
                       {"first", first_json(x.bits.first)}});
    nlohmann::json j = {{"name", c.name},
                        {"verdict", to_string(c.verdict)},
                        {"differing", c.bits.differing},
                        {"compared", c.bits.compared},
                        {"max_ulp", result::json_number(c.bits.max_ulp)},
                        {"ulp_histogram", c.bits.histogram_json()},
                        {"first", first_json(c.bits.first)},
                        {"cases", c.cases},
                        {"comparisons", comps}};
    if (!c.reason.empty()) j["reason"] = c.reason;
    if (!c.ragged.empty()) j["ragged"] = c.ragged;
    if (!c.out_of_bound.empty()) j["out_of_bound"] = c.out_of_bound;
    checks.push_back(std::move(j));
  }
  const auto& o = r.options;
  return {{"backend", {{"name", r.backend}}},
          {"case", o.base.id()},
          {"repeats", o.repeats},
          {"batch_sizes", o.batch_sizes},
          {"invariance", checks},
          {"seconds", r.seconds}};
}

void fill_result(const invariance_result& r, const std::vector<std::string>& require, result::check_result& out) {
  out.probe = "invariance";
  out.backend = r.backend;
  out.case_id = r.options.base.id();
  out.seconds = r.seconds;
  result::table t{"invariance", {"check", "verdict", "differing / compared", "max ulp", "first difference", "cases"}, {}};
  std::vector<std::string> findings;
  for (const auto& c : r.checks) {
    const std::string cases = c.cases.size() == 2 ? c.cases[0] + " vs " + c.cases[1] : c.reason;
    t.rows.push_back({c.name, to_string(c.verdict), fmt::format("{} / {}", c.bits.differing, c.bits.compared),
                      ulp_text(c.bits), first_text(c.bits.first), cases});
    out.metrics.push_back({c.name + ".differing", static_cast<double>(c.bits.differing), "elements", "int"});
    out.metrics.push_back({c.name + ".max_ulp", c.bits.max_ulp, "ulp", "int"});
    const bool required = std::find(require.begin(), require.end(), c.name) != require.end();
    result::gate g;
    g.bound = required ? c.name + " invariant" : c.name + " not breaks";
    g.metric = c.name + ".differing";
    g.measured = static_cast<double>(c.bits.differing);
    g.held = c.verdict == invariance_verdict::m_invariant ||
             (!required && c.verdict != invariance_verdict::m_breaks);
    g.basis = required ? "--require: identical bits" : "both sides within the accuracy bound";
    g.case_id = c.cases.empty() ? "" : c.cases.front();
    out.gates.push_back(g);
    if (c.bits.differing > 0) {
      result::histogram h;
      h.title = c.name + ": differences in ulps of the output dtype";
      h.x_label = "ulps (bins 0, 1, 2, 3-4, 5-8, ...; the last is non-finite)";
      for (std::size_t i = 0; i <= c.bits.histogram.size(); ++i) h.edges.push_back(static_cast<double>(i));
      for (const auto n : c.bits.histogram) h.counts.push_back(static_cast<double>(n));
      out.histograms.push_back(std::move(h));
    }
    if (c.verdict != invariance_verdict::m_invariant && c.verdict != invariance_verdict::m_not_applicable)
      findings.push_back(fmt::format("{} {}", c.name, to_string(c.verdict)));
  }
  out.tables.push_back(std::move(t));
  out.view_shows_gates = true;
  out.notes.push_back({fmt::format("backend {}, case {}", r.backend, out.case_id), 0});
  out.message = findings.empty() ? "invariant on every check that applies" : fmt::format("{}", fmt::join(findings, ", "));
  out.outcome = invariance_exit_code(r, require) == 0 ? result::status::m_pass : result::status::m_fail;
  out.details = to_json(r);
}

}  // namespace numprobe::probes
