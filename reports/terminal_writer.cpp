// Terminal report: one line per check, then a summary. Colour only when asked (on a tty).
#include <fmt/format.h>
#include <iostream>

#include "reports/gate_text.hpp"
#include "reports/report_writer.hpp"

namespace numprobe::reports {

void terminal_writer::print(const result::run_result& r) const {
  do_write(r, std::cout);
  std::cout.flush();
}

void terminal_writer::do_write(const result::run_result& r, std::ostream& out) const {
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
