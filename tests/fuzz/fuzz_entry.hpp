#pragma once
// The parsers under fuzzing (.npy, .safetensors, GGUF), shared by the libFuzzer targets and the
// standalone driver: parse an image, and when it is accepted, decode every element (the decode
// must stay inside the validated bytes). Rejection is numprobe::error and nothing else.
#include <cstddef>
#include <cstdint>
#include <span>

#include "numprobe/base/error.hpp"
#include "numprobe/io/gguf.hpp"
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

// GGUF: the metadata summaries (untrusted text) and, for each tensor of a type numprobe
// decodes, every row. A decoder may refuse (numprobe::error) but never read past its blocks.
inline int run_gguf(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = mapped_file::from_bytes(
        std::as_bytes(std::span<const std::uint8_t>(data, size)), "fuzz.gguf");
    const auto f = gguf_file::parse(file);
    std::size_t text = 0;
    for (const auto& kv : f.metadata()) text += kv.second.summary().size();
    double sink = static_cast<double>(text);
    for (const auto& t : f.tensors()) {
      (void)f.data(t);
      (void)t.shape();
      if (!info(t.type).decodes) continue;
      try {
        for (const float x : f.decode_rows(t, 0, t.rows())) sink += static_cast<double>(x);
      } catch (const numprobe::error&) {
      }
    }
    static volatile double keep;
    keep = sink;
    (void)keep;
  } catch (const numprobe::error&) {
  }
  return 0;
}

}  // namespace numprobe::io::fuzz
