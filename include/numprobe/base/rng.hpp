#pragma once
// Counter-based random numbers: every value is a pure function of (seed, stream, counter), so
// any row, block or element of an input regenerates alone, in any order, on any thread.
#include <cmath>
#include <cstdint>
#include <numbers>

namespace numprobe {

// A 64-bit mixing function (the splitmix64 finalizer, applied twice with distinct keys):
// statistically strong enough for test inputs, and stateless.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

[[nodiscard]] constexpr std::uint64_t counter_hash(std::uint64_t seed, std::uint64_t stream,
                                                   std::uint64_t counter) noexcept {
  return mix64(mix64(seed * 0x9e3779b97f4a7c15ULL + stream) ^ (counter + 0x632be59bd9b4e019ULL));
}

// Uniform in (0, 1): 53 bits, never exactly 0 (safe for log).
[[nodiscard]] inline double uniform_open01(std::uint64_t seed, std::uint64_t stream,
                                           std::uint64_t counter) noexcept {
  return (static_cast<double>(counter_hash(seed, stream, counter) >> 11) + 0.5) * 0x1.0p-53;
}

// Standard normal by Box-Muller over two independent counters (2c, 2c+1).
[[nodiscard]] inline double normal_at(std::uint64_t seed, std::uint64_t stream,
                                      std::uint64_t counter) noexcept {
  const double u1 = uniform_open01(seed, stream, 2 * counter);
  const double u2 = uniform_open01(seed, stream, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace numprobe
