#pragma once
// --filter: an ECMAScript regular expression on tensor names ("" takes every name), one parse
// and one error text for every probe that walks a checkpoint.
#include <regex>
#include <string>

#include "numprobe/base/error.hpp"

namespace numprobe::probes {

// Throws numprobe::error (exit 2) naming --filter on a malformed expression.
[[nodiscard]] inline std::regex name_filter(const std::string& text) {
  try {
    return std::regex(text.empty() ? std::string(".*") : text, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw_input_error("--filter", "bad regular expression '" + text + "': " + e.what());
  }
}

}  // namespace numprobe::probes
