#include "numprobe/core/bound.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"

namespace numprobe {

bool bound::holds(double m) const {
  if (std::isnan(m)) return false;
  switch (op) {
    case bound_op::m_le: return m <= value;
    case bound_op::m_lt: return m < value;
    case bound_op::m_ge: return m >= value;
    case bound_op::m_gt: return m > value;
  }
  return false;
}

std::string bound::text() const {
  constexpr const char* ops[] = {"<=", "<", ">=", ">"};
  return fmt::format("{}{}{}", metric, ops[static_cast<int>(op)], value);
}

bound parse_bound(std::string_view text, const std::string& place) {
  const auto pos = text.find_first_of("<>");
  if (pos == std::string_view::npos || pos == 0)
    throw_input_error(place, fmt::format("'{}' is not METRIC<=X, METRIC<X, METRIC>=X or METRIC>X", text));
  bound b;
  b.metric = std::string(text.substr(0, pos));
  for (char ch : b.metric)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.'))
      throw_input_error(place, fmt::format("bad metric name '{}'", b.metric));
  std::string_view rest = text.substr(pos);
  if (rest.substr(0, 2) == "<=") { b.op = bound_op::m_le; rest.remove_prefix(2); }
  else if (rest.substr(0, 2) == ">=") { b.op = bound_op::m_ge; rest.remove_prefix(2); }
  else if (rest[0] == '<') { b.op = bound_op::m_lt; rest.remove_prefix(1); }
  else { b.op = bound_op::m_gt; rest.remove_prefix(1); }
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), b.value);
  if (ec != std::errc() || p != rest.data() + rest.size() || !std::isfinite(b.value))
    throw_input_error(place, fmt::format("'{}': threshold '{}' is not a finite number", text, rest));
  return b;
}

}  // namespace numprobe
