#pragma once
// Plain aligned text tables and number formatting for the terminal.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <string>
#include <vector>

namespace numprobe::cli {

inline std::string sci(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.3e}", v);
}

inline std::string fixed3(double v) {
  if (!std::isfinite(v)) return sci(v);
  return fmt::format("{:.3f}", v);
}

class text_table {
 public:
  explicit text_table(std::vector<std::string> header) : m_rows{std::move(header)} {}
  void add(std::vector<std::string> row) { m_rows.push_back(std::move(row)); }
  void print(std::FILE* out = stdout) const {
    std::vector<std::size_t> w;
    for (const auto& r : m_rows)
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (w.size() <= i) w.push_back(0);
        w[i] = std::max(w[i], r[i].size());
      }
    for (std::size_t r = 0; r < m_rows.size(); ++r) {
      std::string line;
      for (std::size_t i = 0; i < m_rows[r].size(); ++i) {
        // Numbers right-aligned, the last column (ids, text) left-aligned.
        const bool last = i + 1 == m_rows[r].size() && i > 0 && !m_rows[r][i].empty() &&
                          !std::isdigit(static_cast<unsigned char>(m_rows[r][i][0])) &&
                          m_rows[r][i][0] != '-';
        line += i ? "  " : "";
        line += (i == 0 || last) ? fmt::format("{:<{}}", m_rows[r][i], w[i])
                                 : fmt::format("{:>{}}", m_rows[r][i], w[i]);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      fmt::print(out, "{}\n", line);
    }
  }

 private:
  std::vector<std::vector<std::string>> m_rows;
};

}  // namespace numprobe::cli
