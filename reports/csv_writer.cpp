// CSV. A command's document with a data table (one row per point, tensor or case, at full
// precision) writes that table; otherwise every curve point, in long form (one row per point)
// so any tool can pivot it.
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

// A cell quoted only when it needs it (commas, quotes, line breaks), so numbers stay bare.
std::string csv_cell(std::string_view s) {
  return s.find_first_of(",\"\n\r") == std::string_view::npos ? std::string(s) : csv_quoted(s);
}

const result::table* data_table(const result::run_result& r) {
  if (!r.command_document || r.checks.size() != 1) return nullptr;
  for (const auto& t : r.checks.front().tables)
    if (t.data) return &t;
  return nullptr;
}

void write_row(std::ostream& out, const std::vector<std::string>& cells) {
  for (std::size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << csv_cell(cells[i]);
  out << '\n';
}

bool has_curve_points(const result::run_result& r) {
  for (const auto& c : r.checks)
    for (const auto& cv : c.curves)
      for (const auto& s : cv.lines)
        if (!s.x.empty()) return true;
  return false;
}

}  // namespace

void csv_writer::do_write(const result::run_result& r, std::ostream& out) const {
  if (const auto* t = data_table(r)) {
    write_row(out, t->columns);
    for (const auto& row : t->rows) write_row(out, row);
    return;
  }
  if (r.command_document && r.checks.size() == 1 && !has_curve_points(r)) {
    // A one-point command (attention, quant, kl, a softmax point): its metrics, one per row.
    out << "metric,value,unit\n";
    for (const auto& m : r.checks.front().metrics)
      write_row(out, {m.name, number(m.value), m.unit});
    return;
  }
  out << "check,case,curve,series,x,y\n";
  for (const auto& c : r.checks)
    for (const auto& cv : c.curves)
      for (const auto& s : cv.lines)
        for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
          out << fmt::format("{},{},{},{},{},{}\n", csv_quoted(c.name), csv_quoted(c.case_id), csv_quoted(cv.y_label),
                             csv_quoted(s.name), number(s.x[i]), number(s.y[i]));
}

}  // namespace numprobe::reports
