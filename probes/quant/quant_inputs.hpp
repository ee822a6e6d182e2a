#pragma once
// Seeded synthetic tensors for the quant probe. Every element is a pure function of
// (seed, distribution, flat index), so any block regenerates alone.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/formats/scheme.hpp"

namespace numprobe::probes {

enum class quant_dist : std::uint8_t {
  m_normal,    // N(0, 1)
  m_laplace,   // Laplace with unit variance: heavier tails than normal
  m_llm,       // LLM activations: N(0, 1) x a per-channel gain, 1% of channels x 20
  m_outliers,  // N(0, 1) with one element in 1000 x 100: isolated outliers in blocks
  m_ties,      // tie-adversarial blocks for the scheme (quant_ties.cpp): rounding midpoints,
               // block scales across e4m3's subnormal boundary, amax at the scale rules' edges
};

[[nodiscard]] quant_dist parse_quant_dist(std::string_view text,
                                          const std::string& place = "--dist");
[[nodiscard]] std::string_view name(quant_dist d);

// One element at flat index i of a [rows, cols] tensor (cols gives the channel of i).
[[nodiscard]] double quant_input_value(quant_dist d, std::uint64_t seed, std::int64_t cols,
                                       std::int64_t i);
[[nodiscard]] std::vector<double> make_quant_input(quant_dist d, std::uint64_t seed,
                                                   std::int64_t rows, std::int64_t cols);

// `--dist ties` for a scheme's block grid and element format (quant_ties.cpp). Throws an input
// error naming --dist for an element format wider than 8 bits.
[[nodiscard]] std::vector<double> make_tie_input(std::uint64_t seed, const formats::scheme_config& c,
                                                 std::int64_t rows, std::int64_t cols);
// Any distribution; `ties` reads the scheme, the others ignore it.
[[nodiscard]] std::vector<double> make_quant_input(quant_dist d, std::uint64_t seed, std::int64_t rows,
                                                   std::int64_t cols, const formats::scheme_config& c);

// "MxN" or "N" (one row). Throws an input error naming `place`.
struct shape2d {
  std::int64_t rows = 0, cols = 0;
};
[[nodiscard]] shape2d parse_shape(std::string_view text, const std::string& place = "--shape");

}  // namespace numprobe::probes
