// JUnit XML in the shape CI systems read (Jenkins/GitLab/GitHub test reporters): <testsuites>
// with one <testsuite> per run and one <testcase> per check.
#include <algorithm>
#include <fmt/format.h>

#include "reports/gate_text.hpp"
#include "reports/report_writer.hpp"

namespace numprobe::reports {

void junit_writer::do_write(const result::run_result& r, std::ostream& out) const {
  // JUnit counts skipped testcases among the tests, and each one is listed.
  const std::size_t skipped =
      std::max<std::size_t>(r.not_run.size(), r.checks_planned > static_cast<std::int64_t>(r.checks.size())
                                                  ? static_cast<std::size_t>(r.checks_planned) - r.checks.size()
                                                  : 0);
  const auto tests = r.checks.size() + skipped;
  const auto failures = r.count(result::status::m_fail), errors = r.count(result::status::m_error);
  const std::string suite = xml_escape(r.scenario);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuites name=\"numprobe\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3f}\">\n",
                     tests, failures, errors, r.seconds);
  out << fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                     suite, tests, failures, errors, skipped, r.seconds);
  out << "    <properties>\n";
  auto prop = [&](const std::string& k, const std::string& v) {
    out << fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", xml_escape(k), xml_escape(v));
  };
  prop("numprobe.version", r.envelope.value("version", ""));
  prop("numprobe.git_revision", r.envelope.value("git_revision", ""));
  if (!r.shard.empty()) prop("numprobe.shard", r.shard);
  prop("numprobe.incomplete", r.incomplete ? "true" : "false");
  out << "    </properties>\n";
  for (const auto& c : r.checks) {
    out << fmt::format("    <testcase name=\"{}\" classname=\"numprobe.{}\" time=\"{:.3f}\">\n",
                       xml_escape(c.name), xml_escape(c.probe), c.seconds);
    if (c.outcome == result::status::m_fail) {
      std::string msg, body;
      for (const auto& g : c.gates) {
        if (!g.held) msg += (msg.empty() ? "" : "; ") + detail::gate_text(c, g);
        body += fmt::format("{} {}{}  case {}\n", g.held ? "PASS" : "FAIL", detail::gate_text(c, g),
                            "  basis: " + detail::basis_text(g), g.case_id);
      }
      out << fmt::format("      <failure message=\"{}\" type=\"bound-breach\">{}</failure>\n",
                         xml_escape(msg), xml_escape(body));
    } else if (c.outcome == result::status::m_error) {
      out << fmt::format("      <error message=\"{}\" type=\"exit-{}\">{}</error>\n", xml_escape(c.message),
                         c.error_code, xml_escape(c.message));
    }
    std::string sysout = fmt::format("case {}\nbackend {}\n", c.case_id, c.backend);
    for (const auto& m : c.metrics)
      sysout += fmt::format("{} = {}{}\n", m.name, result::format_value(m.value, m.format),
                            m.unit.empty() ? "" : " " + m.unit);
    out << fmt::format("      <system-out>{}</system-out>\n", xml_escape(sysout));
    out << "    </testcase>\n";
  }
  for (std::size_t i = 0; i < skipped; ++i) {
    // "probe:name" as run_scenario records it; a result without names still lists its count.
    const std::string id = i < r.not_run.size() ? r.not_run[i] : fmt::format("unknown:not-run-{}", i);
    const auto colon = id.find(':');
    const std::string probe = colon == std::string::npos ? "unknown" : id.substr(0, colon);
    const std::string name = colon == std::string::npos ? id : id.substr(colon + 1);
    out << fmt::format("    <testcase name=\"{}\" classname=\"numprobe.{}\" time=\"0\">\n"
                       "      <skipped message=\"not run: the run was interrupted\"/>\n    </testcase>\n",
                       xml_escape(name), xml_escape(probe));
  }
  out << "  </testsuite>\n</testsuites>\n";
}

}  // namespace numprobe::reports
