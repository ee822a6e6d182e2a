// libFuzzer target for the case-id parser, `--case ID` (scripts/fuzz.sh builds it with clang).
#include "fuzz_case_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return numprobe::fuzz::run_case_id(data, size);
}
