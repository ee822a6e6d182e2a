// libFuzzer target for the scenario loader (TOML text; scripts/fuzz.sh builds it with clang
// through CMake, since the loader needs every probe's parameter table). Rejection is
// numprobe::error and nothing else; sweeps are capped before expansion, so no input may make
// it allocate without bound (-rss_limit_mb catches that).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "numprobe/base/error.hpp"
#include "src/scenario/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)numprobe::scenario::parse_scenario(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  } catch (const numprobe::error&) {
  }
  return 0;
}
