#pragma once
// FNV-1a 64 of an output's bytes (issue 32 B): two outputs hash alike when they are the same
// bits (a collision between two different outputs has probability about 2^-64 per pair), so a
// burn-in compares devices by one number per workload and repetition, not by their outputs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace numprobe::probes {

inline constexpr std::uint64_t k_fnv_offset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t k_fnv_prime = 0x100000001b3ULL;

// Continues `h` over the bytes of `values` (host byte order: hashes are compared on one host,
// or against a golden file recorded on a host of the same byte order).
template <class T>
[[nodiscard]] std::uint64_t fnv1a64(std::span<const T> values, std::uint64_t h = k_fnv_offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(values.data());
  for (std::size_t i = 0; i < values.size_bytes(); ++i) {
    h ^= p[i];
    h *= k_fnv_prime;
  }
  return h;
}

}  // namespace numprobe::probes
