// Terminal report. A scenario run: one line per check, then a summary. A command's document
// (`numprobe drift`, `quant`, ...): its one check's view for people, in reading order (the
// notes and tables its probe built), then its gates and the time. Colour only when asked (on a
// tty).
#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <iostream>

#include "reports/gate_text.hpp"
#include "reports/report_writer.hpp"
#include "reports/view_order.hpp"

namespace numprobe::reports {

std::string aligned_text(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w;
  auto widen = [&w](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  };
  widen(header);
  for (const auto& r : rows) widen(r);
  std::string text;
  auto emit = [&](const std::vector<std::string>& r) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      // Numbers right-aligned; the first column and a text last column (ids, notes) left-aligned.
      const bool last = i + 1 == r.size() && i > 0 && !r[i].empty() &&
                        !std::isdigit(static_cast<unsigned char>(r[i][0])) && r[i][0] != '-';
      line += i ? "  " : "";
      line += (i == 0 || last) ? fmt::format("{:<{}}", r[i], w[i]) : fmt::format("{:>{}}", r[i], w[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  };
  if (!header.empty()) emit(header);
  for (const auto& r : rows) emit(r);
  return text;
}

namespace {

// Lines out, with runs of blank lines collapsed to one and none at the start.
class line_sink {
 public:
  explicit line_sink(std::ostream& out) : m_out(out) {}
  void line(const std::string& s) {
    if (s.empty()) {
      m_blank_pending = m_any;
      return;
    }
    if (m_blank_pending) m_out << '\n';
    m_blank_pending = false;
    m_any = true;
    m_out << s << '\n';
  }
  void block(const std::string& text) {  // several lines, e.g. an aligned table
    std::size_t at = 0;
    while (at < text.size()) {
      const auto nl = text.find('\n', at);
      line(text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
  }

 private:
  std::ostream& m_out;
  bool m_any = false, m_blank_pending = false;
};

void write_table(line_sink& s, const result::table& t) {
  s.line("");
  if (!t.title.empty()) s.line(t.title);
  s.block(aligned_text(t.columns, t.rows));
  s.line("");
}

}  // namespace

void terminal_writer::write_command_body(const result::check_result& c, std::ostream& out) const {
  line_sink s(out);
  // The trace first (every step, in order), so the findings are what the reader sees last.
  if (m_traces)
    for (const auto& t : c.traces) write_table(s, t);
  detail::for_each_in_reading_order(
      c, [&s](const std::vector<std::string>& lines) { for (const auto& l : lines) s.line(l); },
      [&s](const result::table& t) { write_table(s, t); });
  if (c.notes.empty() && std::none_of(c.tables.begin(), c.tables.end(), [](const auto& t) { return !t.data; })) {
    if (!c.message.empty()) s.line(c.message);
    if (!c.metrics.empty()) {
      result::table m{"", {"metric", "value", "unit"}, {}};
      for (const auto& x : c.metrics) m.rows.push_back({x.name, result::format_value(x.value, x.format), x.unit});
      write_table(s, m);
    }
  }
  s.line("");
  for (const auto& g : c.gates)
    if (!c.view_shows_gates) {
      s.line(fmt::format("{} {}  measured {}{}", g.held ? "PASS" : "FAIL", g.bound, detail::measured_text(c, g),
                         g.held || g.case_id.empty() || g.case_id == c.case_id ? "" : "  at " + g.case_id));
      if (g.is_default) s.line("     " + detail::basis_text(g));
    }
  if (c.outcome == result::status::m_error && !c.message.empty() && !c.notes.empty())
    s.line("ERROR " + c.message);
  if (c.seconds > 0) s.line(fmt::format("time      {:.2f} s", c.seconds));
}

void terminal_writer::print(const result::run_result& r) const {
  do_write(r, std::cout);
  std::cout.flush();
}

void terminal_writer::do_write(const result::run_result& r, std::ostream& out) const {
  if (r.command_document && r.checks.size() == 1) {
    write_command_body(r.checks.front(), out);
    return;
  }
  auto paint = [this](result::status s) -> std::string {
    const auto text = fmt::format("{:<5}", result::to_string(s));
    if (!m_colour) return text;
    const char* code = s == result::status::m_pass ? "32" : s == result::status::m_fail ? "31" : "35";
    return fmt::format("\033[1;{}m{}\033[0m", code, text);
  };
  for (const auto& c : r.checks) {
    std::string gates;
    if (c.outcome == result::status::m_error) {
      gates = c.message;
    } else {
      // Breached gates first: the line says why a check failed.
      for (int pass = 0; pass < 2; ++pass)
        for (const auto& g : c.gates)
          if (g.held == (pass == 1)) gates += (gates.empty() ? "" : ", ") + detail::gate_text(c, g);
    }
    out << fmt::format("{} {}  {}  [{}]  {}\n", paint(c.outcome), c.name, gates, c.backend, c.case_id);
  }
  out << fmt::format("\n{} checks: {} passed, {} failed, {} errors{}  ({:.1f} s)\n", r.checks.size(),
                     r.count(result::status::m_pass), r.count(result::status::m_fail),
                     r.count(result::status::m_error),
                     r.checks_resumed ? fmt::format(", {} resumed from the journal", r.checks_resumed) : "",
                     r.seconds);
  std::size_t bare = 0;
  for (const auto& c : r.checks)
    for (const auto& g : c.gates) bare += g.basis.empty() ? 1 : 0;
  if (bare > 0)
    out << fmt::format("WARNING: {} bound(s) have no basis given (NUMERICS.md rule 3: say why each number)\n", bare);
  if (r.incomplete)
    out << fmt::format("INCOMPLETE: {} of {} checks ran (interrupted); rerun with --resume to finish\n",
                       r.checks.size(), r.checks_planned);
}

}  // namespace numprobe::reports
