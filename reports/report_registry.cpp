// The report formats: one line per writer.
#include <sstream>

#include "reports/report_writer.hpp"

namespace numprobe::reports {
namespace {
template <class W>
std::unique_ptr<report_writer> make() {
  return std::make_unique<W>();
}
}  // namespace

std::span<const report_format> report_formats() {
  static const report_format formats[] = {
      {"json", "report.json", "every point, with schema_version, tool version, machine and seeds", &make<json_writer>},
      {"junit", "junit.xml", "JUnit XML, one testcase per check", &make<junit_writer>},
      {"md", "summary.md", "Markdown summary for CI job pages", &make<markdown_writer>},
      {"csv", "curves.csv", "every curve point as CSV", &make<csv_writer>},
      {"html", "report.html", "self-contained HTML with inline SVG plots", &make<html_writer>},
  };
  return formats;
}

std::string report_writer::render(const result::run_result& r) const {
  std::ostringstream out;
  do_write(r, out);
  return out.str();
}

std::string xml_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default:
        // XML 1.0 forbids most control characters even when escaped.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t' && ch != '\r') o += ' ';
        else o += ch;
    }
  }
  return o;
}

}  // namespace numprobe::reports
