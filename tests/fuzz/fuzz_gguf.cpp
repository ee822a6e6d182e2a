// libFuzzer target for the GGUF parser and the block decoders behind it (scripts/fuzz.sh builds
// it with clang).
#include "fuzz_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return numprobe::io::fuzz::run_gguf(data, size);
}
