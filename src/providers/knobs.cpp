#include "src/providers/knobs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "numprobe/base/error.hpp"

namespace numprobe {
namespace {

// `parse` (std::stoll, std::stod) over the whole of `t`; false for no number or trailing text.
template <class T, class Parse>
bool parse_whole(const std::string& t, Parse parse, T& v) {
  try {
    std::size_t used = 0;
    v = parse(t, &used);
    return used == t.size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

backend_spec parse_backend_spec(const std::string& backend) {
  const auto colon = backend.find(':');
  if (colon == std::string::npos) return {backend, "", false};
  return {backend.substr(0, colon), backend.substr(colon + 1), true};
}

const std::string* knob_reader::first_unknown(std::initializer_list<std::string_view> known) const {
  for (const auto& [name, value] : m_knobs) {
    bool listed = false;
    for (std::string_view k : known) listed = listed || k == name;
    if (!listed) return &name;
  }
  return nullptr;
}

std::int64_t knob_reader::integer(const std::string& name, std::int64_t lo, std::int64_t hi) const {
  const std::string& t = text(name);
  std::int64_t v = 0;
  if (!parse_whole(t, [](const std::string& s, std::size_t* used) { return std::stoll(s, used); }, v))
    throw_input_error("--" + name, fmt::format("expected an integer, got '{}'", t));
  if (v < lo || v > hi)
    throw_input_error("--" + name, hi == std::numeric_limits<std::int64_t>::max()
                                       ? fmt::format("must be at least {}, got {}", lo, v)
                                       : fmt::format("must be in [{}, {}], got {}", lo, hi, v));
  return v;
}

double knob_reader::positive(const std::string& name, double hi) const {
  const std::string& t = text(name);
  double v = 0;
  if (!parse_whole(t, [](const std::string& s, std::size_t* used) { return std::stod(s, used); }, v))
    throw_input_error("--" + name, fmt::format("not a number: '{}'", t));
  if (!(v > 0) || !std::isfinite(v) || v > hi) throw_input_error("--" + name, "must be finite and > 0");
  return v;
}

}  // namespace numprobe
