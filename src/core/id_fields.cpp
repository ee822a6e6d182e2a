#include "numprobe/core/id_fields.hpp"

#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace numprobe {

std::int64_t parse_id_int(std::string_view v, const std::string& key) {
  std::int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size())
    throw_input_error("case id field " + key, fmt::format("expected an integer, got '{}'", v));
  return out;
}

double parse_id_double(std::string_view v, const std::string& key) {
  double out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || !std::isfinite(out))
    throw_input_error("case id field " + key, fmt::format("expected a finite number, got '{}'", v));
  return out;
}

}  // namespace numprobe
