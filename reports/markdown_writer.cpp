// Markdown for CI job summaries: a verdict line, a table of checks, then the breaches and errors.
#include <fmt/format.h>

#include "reports/gate_text.hpp"
#include "reports/report_writer.hpp"
#include "reports/view_order.hpp"

namespace numprobe::reports {
namespace {

// Pipes and newlines would break a table cell.
std::string cell(std::string_view s) {
  std::string o;
  for (char ch : s) {
    if (ch == '|') o += "\\|";
    else if (ch == '\n') o += ' ';
    else o += ch;
  }
  return o;
}

void write_table(std::ostream& out, const result::table& t, std::string_view heading) {
  if (!t.title.empty()) out << "\n" << heading << cell(t.title) << "\n";
  out << "\n|";
  for (const auto& c : t.columns) out << ' ' << cell(c) << " |";
  out << "\n|";
  for (std::size_t i = 0; i < t.columns.size(); ++i) out << "---|";
  out << '\n';
  for (const auto& row : t.rows) {
    out << '|';
    for (const auto& c : row) out << ' ' << cell(c) << " |";
    out << '\n';
  }
}

// A command's document shows its one check whole: the finding, the metrics, the tables and
// the trace (a run's summary stays one line per check).
void write_check_body(std::ostream& out, const result::check_result& c) {
  if (!c.message.empty()) out << "\n" << cell(c.message) << "\n";
  if (!c.metrics.empty()) {
    out << "\n| metric | value |\n|---|---|\n";
    for (const auto& m : c.metrics)
      out << fmt::format("| {} | {}{} |\n", cell(m.name), result::format_value(m.value, m.format),
                         m.unit.empty() ? "" : " " + m.unit);
  }
  // The probe's notes as preformatted text (they are aligned for a fixed-width font).
  detail::for_each_in_reading_order(
      c,
      [&out](const std::vector<std::string>& lines) {
        out << "\n```text\n";
        for (const auto& l : lines) out << l << '\n';
        out << "```\n";
      },
      [&out](const result::table& t) { write_table(out, t, "### "); });
  for (const auto& t : c.traces) write_table(out, t, "## Trace: ");
}

}  // namespace

void markdown_writer::do_write(const result::run_result& r, std::ostream& out) const {
  const auto pass = r.count(result::status::m_pass), fail = r.count(result::status::m_fail),
             err = r.count(result::status::m_error);
  if (r.command_document) out << "# " << cell(r.scenario) << "\n\n";  // "# numprobe bisect"
  else out << "## numprobe: " << cell(r.scenario) << "\n\n";
  out << fmt::format("**{}** — {} checks: {} passed, {} failed, {} errors ({:.1f} s){}\n\n",
                     err ? "ERROR" : fail ? "FAIL" : "PASS", r.checks.size(), pass, fail, err, r.seconds,
                     r.shard.empty() ? "" : fmt::format(", shard {}", r.shard));
  if (r.incomplete)
    out << fmt::format("> **Incomplete:** {} of {} checks ran (interrupted).\n\n", r.checks.size(), r.checks_planned);
  out << "| status | check | bounds (measured) | backend | case |\n|---|---|---|---|---|\n";
  for (const auto& c : r.checks) {
    std::string gates;
    if (c.outcome == result::status::m_error) gates = c.message;
    for (const auto& g : c.gates)
      gates += (gates.empty() ? "" : "<br>") + std::string(g.held ? "" : "**") + detail::gate_text(c, g) +
               (g.held ? "" : "**");
    out << fmt::format("| {} | {} | {} | {} | `{}` |\n", result::to_string(c.outcome), cell(c.name), cell(gates),
                       cell(c.backend), cell(c.case_id));
  }
  if (r.command_document && r.checks.size() == 1) write_check_body(out, r.checks.front());
  bool header = false;
  for (const auto& c : r.checks)
    for (const auto& g : c.gates)
      if (!g.held) {
        if (!header) out << "\n### Breaches\n\n";
        header = true;
        out << fmt::format("- **{}**: `{}` measured {} at `{}`{}\n", cell(c.name), g.bound, detail::measured_text(c, g),
                           g.case_id, " — basis: " + detail::basis_text(g));
      }
  out << fmt::format("\n<sub>numprobe {} ({}) on {}</sub>\n", r.envelope.value("version", "?"),
                     r.envelope.value("git_revision", "?"),
                     r.envelope.contains("machine") ? r.envelope["machine"].value("host", "?") : "?");
}

}  // namespace numprobe::reports
