#include "numprobe/core/result.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"

namespace numprobe::result {

std::string_view to_string(status s) {
  switch (s) {
    case status::m_pass: return "PASS";
    case status::m_fail: return "FAIL";
    case status::m_error: return "ERROR";
  }
  return "ERROR";
}

status parse_status(std::string_view text) {
  if (text == "PASS") return status::m_pass;
  if (text == "FAIL") return status::m_fail;
  if (text == "ERROR") return status::m_error;
  throw_input_error("status", fmt::format("'{}' is not PASS, FAIL or ERROR", text));
}

const metric* check_result::find_metric(std::string_view n) const {
  for (const auto& m : metrics)
    if (m.name == n) return &m;
  return nullptr;
}

int check_result::exit_code() const {
  switch (outcome) {
    case status::m_pass: return 0;
    case status::m_fail: return 1;
    case status::m_error: return error_code == 3 ? 3 : 2;
  }
  return 3;
}

int run_result::exit_code() const {
  if (signal > 0) return 128 + signal;
  int worst = 0;
  for (const auto& c : checks) worst = std::max(worst, c.exit_code());
  return worst;
}

std::int64_t run_result::count(status s) const {
  return std::count_if(checks.begin(), checks.end(), [s](const auto& c) { return c.outcome == s; });
}

std::string format_value(double v, std::string_view format) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (format == "int") return fmt::format("{}", static_cast<long long>(std::llround(v)));
  if (format == "fixed") return fmt::format("{:.3f}", v);
  if (format == "pct") return fmt::format("{:.3f}%", 100.0 * v);
  if (v == 0.0) return "0";
  return fmt::format("{:.3e}", v);
}

}  // namespace numprobe::result

namespace numprobe::result {

std::string sci(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.3e}", v);
}

std::string fixed3(double v) {
  if (!std::isfinite(v)) return sci(v);
  return fmt::format("{:.3f}", v);
}

void view_builder::line(std::string text) {
  std::int32_t people = 0;
  for (const auto& t : m_c.tables) people += t.data ? 0 : 1;
  m_c.notes.push_back({std::move(text), people});
}

table& view_builder::add_table(std::vector<std::string> columns, std::string title) {
  table t;
  t.title = std::move(title);
  t.columns = std::move(columns);
  return add_table(std::move(t));
}

table& view_builder::add_table(table t) {
  t.data = false;
  m_c.tables.push_back(std::move(t));
  return m_c.tables.back();
}

}  // namespace numprobe::result
