#pragma once
// The parsers under fuzzing, shared by the libFuzzer targets and the standalone driver:
// parse an image, and when it is accepted, decode every element (the decode must stay
// inside the validated bytes). Rejection is numprobe::error and nothing else.
#include <cstddef>
#include <cstdint>
#include <span>

#include "numprobe/base/error.hpp"
#include "numprobe/io/mapped_file.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/io/safetensors.hpp"

namespace numprobe::io::fuzz {

inline void decode_all(const tensor_view& v) {
  if (v.dtype == dtype::m_raw8) return;  // has no value until a format is named
  double sink = 0;
  v.for_each_chunk(4096, [&](std::uint64_t, std::span<const double> s) {
    for (double x : s) sink += x;
  });
  // A volatile store keeps the decode observable, so the optimizer cannot drop it.
  static volatile double keep;
  keep = sink;
  (void)keep;
}

inline int run_npy(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = mapped_file::from_bytes(
        std::as_bytes(std::span<const std::uint8_t>(data, size)), "fuzz.npy");
    decode_all(parse_npy(file));
  } catch (const numprobe::error&) {
  }
  return 0;
}

inline int run_safetensors(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = mapped_file::from_bytes(
        std::as_bytes(std::span<const std::uint8_t>(data, size)), "fuzz.safetensors");
    const auto f = safetensors_file::parse(file);
    for (const auto& t : f.tensors()) decode_all(t);
  } catch (const numprobe::error&) {
  }
  return 0;
}

}  // namespace numprobe::io::fuzz
