#pragma once
// Entry points for the text parsers under fuzzing (issue 15): the case-id parser (`--case ID`)
// and the scenario loader (TOML). Rejection is numprobe::error and nothing else; an accepted
// case id must print an id that parses back to the same id (the id is the case's identity).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/base/error.hpp"

namespace numprobe::fuzz {

inline int run_case_id(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string id;
  try {
    id = parse_attention_case(text).id();
  } catch (const numprobe::error&) {
    return 0;
  }
  // The canonical id of an accepted case must be accepted and stable.
  if (parse_attention_case(id).id() != id) std::abort();
  return 0;
}

}  // namespace numprobe::fuzz
