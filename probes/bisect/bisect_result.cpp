// bisect's result model: what `numprobe bisect` and a scenario's bisect check report.
#include <fmt/format.h>
#include <string_view>

#include "numprobe/core/result_gates.hpp"
#include "probes/bisect/bisect.hpp"

namespace numprobe::probes {
namespace {

std::string join_with(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : std::string(sep)) + x;
  return s;
}

std::string sci_text(double v) { return result::format_value(v, "sci"); }

// The localisation stages beyond length, each a table when it ran.
void stage_tables(const bisect_result& r, result::check_result& out) {
  if (r.fp8.ran) {
    result::table t{fmt::format("fp8 quantization points at S={}: {} (verdict {})", r.fp8.seq, r.fp8.text,
                                r.fp8.verdict),
                    {"restored", "rel_rms", "ratio", "NaN", "removes the failure"}, {}};
    t.rows.push_back({"(none)", sci_text(r.fp8.before.rel_rms), sci_text(r.fp8.before.ratio),
                      std::to_string(r.fp8.before.nan), "-"});
    for (const auto& e : r.fp8.restorations)
      t.rows.push_back({join_with(e.points, "+"), sci_text(e.outcome.rel_rms), sci_text(e.outcome.ratio),
                        std::to_string(e.outcome.nan), e.removes ? "yes" : "no"});
    out.tables.push_back(std::move(t));
  }
  if (r.decode.ran) {
    result::table t{fmt::format("split-KV decode at S={}: {}", r.decode.seq, r.decode.text),
                    {"check", "value", "rel_rms", "NaN", "result"}, {}};
    auto rows = [&](const std::vector<decode_sweep_point>& v, const char* what) {
      for (const auto& p : v)
        t.rows.push_back({what, std::to_string(p.value), sci_text(p.outcome.rel_rms), std::to_string(p.outcome.nan),
                          p.outcome.failed ? "FAIL" : "pass"});
    };
    rows(r.decode.split_sweep, "splits");
    rows(r.decode.page_sweep, "page size");
    rows(r.decode.page_edges, "length");
    out.tables.push_back(std::move(t));
  }
  if (!r.precision.curve_lengths.empty()) {
    result::table t{fmt::format("precision bisection: minimal set {{{}}} on {}", join_with(r.precision.culprit, ", "),
                                r.precision.family_case),
                    {"seq", "before", "after"}, {}};
    for (std::size_t i = 0; i < r.precision.curve_lengths.size(); ++i)
      t.rows.push_back({std::to_string(r.precision.curve_lengths[i]), sci_text(r.precision.curve_before[i]),
                        sci_text(r.precision.curve_after[i])});
    out.tables.push_back(std::move(t));
  }
}

// What the terminal shows (the trace is printed before it): the first failing length and the
// tile it sits on, each class with its evidence, the tables of the stages beyond length, then
// the classification and the culprit.
void add_view(const bisect_result& r, result::check_result& out) {
  using result::sci;
  result::view_builder v(out);
  v.line(fmt::format("backend   {}", r.provider));
  v.line(fmt::format("case      {}", r.base_case));
  v.line(fmt::format("bound     {}", r.bounds.empty() ? "" : r.bounds.front()));
  v.blank();
  if (!r.failure_found) {
    v.line("result    every length tried holds the bound");
    if (r.exposed.tried)
      v.line(fmt::format("exposing families hold at the longest length too: {}", join_with(r.exposed.tried_labels, "; ")));
    if (r.family_sweep_ran) {
      v.line("family sweep (every class's probe against its control):");
      for (const auto& c : r.family_sweep) {
        v.line(fmt::format("  {:<6} {}", c.verdict == "fail" ? "[FAIL]" : c.verdict == "pass" ? "[pass]" : "[n/a]", c.name));
        if (c.verdict == "fail")
          for (const auto& e : c.evidence) v.line(fmt::format("           + {}", e));
      }
      v.line(fmt::format("classification     {}", r.classification));
    }
    return;
  }
  const auto& L = r.length;
  if (!r.exposed.label.empty())
    v.line(fmt::format("exposed by         {}: the case under test holds the bound at every length tried; the failure "
                       "appeared only under this family (step {}, {}), and the lengths below are its own",
                       r.exposed.label, r.exposed.step, r.exposed.case_id));
  v.line(fmt::format("first failing seq  {}{}", L.first_failing,
                     L.fails_at_lowest ? " (fails at the shortest length tried)"
                                       : fmt::format(" (passes at {})", L.last_passing)));
  v.line(fmt::format("tile aligned       {} (B={} from {}, pattern {})", L.tile_aligned ? "yes" : "no", L.tile,
                     L.tile_source, L.tile_pattern));
  if (r.inferred_tile.ran) v.line(fmt::format("inferred tile      {}", tile_text(r.inferred_tile)));
  for (const auto& c : r.classes) {
    if (c.verdict == "not tested") continue;
    v.line(fmt::format("{:<8} {}", c.verdict == "supported" ? "[yes]" : "[no]", c.name));
    for (const auto& e : c.evidence_for) v.line(fmt::format("           + {}", e));
    for (const auto& e : c.evidence_against) v.line(fmt::format("           - {}", e));
  }
  stage_tables(r, out);
  std::string cands;
  for (const auto& c : r.candidates) cands += (cands.empty() ? "" : "; ") + c;
  v.line(fmt::format("classification     {}{}", r.classification, r.candidates.size() > 1 ? " (" + cands + ")" : ""));
  v.line(fmt::format("culprit            {}", culprit_text(r)));
}

}  // namespace

result::table trace_table(const std::vector<bisect_step>& steps, std::string title) {
  result::table t{std::move(title), {"#", "stage", "seq", "change", "rel_rms", "ratio", "nan", "failed", "decision", "case"}, {}};
  for (const auto& st : steps)
    t.rows.push_back({std::to_string(st.index), st.stage, std::to_string(st.seq), st.change,
                      result::format_value(st.rel_rms, "sci"), result::format_value(st.ratio_to_naive, "fixed"),
                      std::to_string(st.nan_count), st.failed ? "yes" : "no", st.decision, st.case_id});
  return t;
}

void fill_result(const bisect_result& r, const bisect_options& o, result::check_result& out) {
  out.backend = r.provider;
  out.case_id = r.base_case;
  out.message = fmt::format("{}: {}{}", r.classification, culprit_text(r),
                            r.exposed.label.empty() ? "" : fmt::format(" (only under {})", r.exposed.label));
  out.metrics.push_back({"failure_found", r.failure_found ? 1.0 : 0.0, "", "int"});
  out.metrics.push_back({"first_failing_seq", static_cast<double>(r.length.first_failing), "keys", "int"});
  out.metrics.push_back({"last_passing_seq", static_cast<double>(r.length.last_passing), "keys", "int"});
  out.metrics.push_back({"steps", static_cast<double>(r.trace.size()), "", "int"});
  std::string gates;
  for (const auto& b : o.bounds) gates += (gates.empty() ? "" : ", ") + b.text();
  out.gates.push_back(result::evaluate_gate(
      bound{"failure_found", bound_op::m_le, 0.0,
            fmt::format("no length in {}..{} breaches {}, under the case's own inputs or diffuse rows at the "
                        "longest length",
                        o.seq_lo, o.seq_hi, gates)},
      r.failure_found ? 1.0 : 0.0, r.base_case));
  out.traces.push_back(trace_table(r.trace, "bisection trace"));
  add_view(r, out);
  out.seconds = r.seconds;
  out.details = to_json(r);
}

}  // namespace numprobe::probes
