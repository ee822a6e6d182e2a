#pragma once
// Parses a JSON header from an untrusted file: UTF-8 checked first, duplicate top-level keys
// detected (nlohmann keeps the last silently), nesting bounded so a hostile header cannot
// build a deep tree.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace numprobe::io::detail {

// Throws numprobe::error (exit 2) naming `place`: not UTF-8, not JSON, not an object,
// nested deeper than `max_depth`, or a duplicate top-level key (named in the message).
[[nodiscard]] nlohmann::json parse_json_object(std::string_view text, const std::string& place,
                                               int max_depth);

}  // namespace numprobe::io::detail
