#pragma once
// Parsing of the `key=value` fields of canonical case ids (attention(...), softmax(...)):
// shared so every id is read with the same rules and the same one-line errors.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "numprobe/base/error.hpp"

namespace numprobe {

// An integer field; throws an input error naming "case id field KEY".
[[nodiscard]] std::int64_t parse_id_int(std::string_view value, const std::string& key);
// A finite number field; throws an input error naming "case id field KEY".
[[nodiscard]] double parse_id_double(std::string_view value, const std::string& key);

// A named enumerator from a {value, name} table; the error lists the known names.
template <class E, std::size_t N>
[[nodiscard]] E parse_named(const std::array<std::pair<E, std::string_view>, N>& table,
                            std::string_view text, const std::string& place,
                            std::string_view what) {
  std::string known;
  for (const auto& [v, n] : table) {
    if (n == text) return v;
    known += (known.empty() ? "" : "|") + std::string(n);
  }
  throw_input_error(place, "unknown " + std::string(what) + " '" + std::string(text) +
                               "' (expected " + known + ")");
}

}  // namespace numprobe
