// CSV of every curve point, in long form (one row per point) so any tool can pivot it.
#include <cmath>
#include <fmt/format.h>

#include "reports/report_writer.hpp"

namespace numprobe::reports {
namespace {

std::string csv_quoted(std::string_view s) {
  std::string o = "\"";
  for (char ch : s) o += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return o + "\"";
}

std::string number(double v) { return std::isfinite(v) ? fmt::format("{:.17g}", v) : (std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf")); }

}  // namespace

void csv_writer::do_write(const result::run_result& r, std::ostream& out) const {
  out << "check,case,curve,series,x,y\n";
  for (const auto& c : r.checks)
    for (const auto& cv : c.curves)
      for (const auto& s : cv.lines)
        for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
          out << fmt::format("{},{},{},{},{},{}\n", csv_quoted(c.name), csv_quoted(c.case_id), csv_quoted(cv.y_label),
                             csv_quoted(s.name), number(s.x[i]), number(s.y[i]));
}

}  // namespace numprobe::reports
