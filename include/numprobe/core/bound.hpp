#pragma once
// A gate on one metric: "rel_rms<=4e-3", "ratio_to_naive<=2", "top1>=0.99".
#include <cstdint>
#include <string>
#include <string_view>

namespace numprobe {

enum class bound_op : std::uint8_t { m_le, m_lt, m_ge, m_gt };

struct bound {
  std::string metric;
  bound_op op = bound_op::m_le;
  double value = 0.0;
  std::string basis;  // why this number (shown in reports)
  bool is_default = false;  // the command's own gate, applied because no --bound was given

  // NaN never holds; +inf holds only for >= / > bounds.
  [[nodiscard]] bool holds(double measured) const;
  [[nodiscard]] std::string text() const;  // "rel_rms<=0.004"
};

// Throws an input error naming `place` on a malformed expression.
[[nodiscard]] bound parse_bound(std::string_view text, const std::string& place = "--bound");

}  // namespace numprobe
