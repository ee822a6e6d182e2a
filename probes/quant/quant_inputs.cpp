#include "probes/quant/quant_inputs.hpp"

#include <charconv>
#include <cmath>
#include <numbers>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"

namespace numprobe::probes {
namespace {

// Streams keep the distributions' random numbers independent of one another.
constexpr std::uint64_t k_stream_value = 0x9a11;
constexpr std::uint64_t k_stream_channel = 0x9a12;
constexpr std::uint64_t k_stream_outlier = 0x9a13;

// One dimension of `whole` (echoed as given: a message about '4x4x4' says '4x4x4').
std::int64_t parse_dim(std::string_view s, std::string_view whole, const std::string& place) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0)
    throw_input_error(place, "expected MxN with positive integers, got '" + std::string(whole) + "'");
  return v;
}

}  // namespace

quant_dist parse_quant_dist(std::string_view text, const std::string& place) {
  for (auto d : {quant_dist::m_normal, quant_dist::m_laplace, quant_dist::m_llm,
                 quant_dist::m_outliers, quant_dist::m_ties})
    if (name(d) == text) return d;
  throw_input_error(place, "unknown distribution '" + std::string(text) +
                               "' (known: normal, laplace, llm, outliers, ties)");
}

std::string_view name(quant_dist d) {
  switch (d) {
    case quant_dist::m_normal: return "normal";
    case quant_dist::m_laplace: return "laplace";
    case quant_dist::m_llm: return "llm";
    case quant_dist::m_outliers: return "outliers";
    case quant_dist::m_ties: return "ties";
  }
  return "?";
}

double quant_input_value(quant_dist d, std::uint64_t seed, std::int64_t cols, std::int64_t i) {
  const auto n = static_cast<std::uint64_t>(i);
  switch (d) {
    case quant_dist::m_normal: return normal_at(seed, k_stream_value, n);
    case quant_dist::m_laplace: {
      // Inverse CDF; b = 1/sqrt(2) gives variance 2 b^2 = 1.
      const double u = uniform_open01(seed, k_stream_value, n) - 0.5;
      return -std::copysign(1.0, u) * std::log1p(-2.0 * std::fabs(u)) / std::numbers::sqrt2;
    }
    case quant_dist::m_llm: {
      // A few channels carry systematic outliers (LLM.int8, SmoothQuant observations); the rest
      // have log-normal gains, so blocks mix scales.
      const auto c = static_cast<std::uint64_t>(i % cols);
      const bool outlier = uniform_open01(seed, k_stream_channel, 2 * c) < 0.01;
      const double gain = outlier ? 20.0 : std::exp(0.5 * normal_at(seed, k_stream_channel, 2 * c + 1));
      return gain * normal_at(seed, k_stream_value, n);
    }
    case quant_dist::m_outliers: {
      const bool outlier = uniform_open01(seed, k_stream_outlier, n) < 1e-3;
      return (outlier ? 100.0 : 1.0) * normal_at(seed, k_stream_value, n);
    }
    case quant_dist::m_ties:
      throw_input_error("--dist", "ties depends on the scheme's blocks: use make_quant_input with the scheme");
  }
  return 0.0;
}

std::vector<double> make_quant_input(quant_dist d, std::uint64_t seed, std::int64_t rows,
                                     std::int64_t cols) {
  // Before the parallel loop: an exception must not leave an OpenMP region.
  if (d == quant_dist::m_ties)
    throw_input_error("--dist", "ties depends on the scheme's blocks: use make_quant_input with the scheme");
  std::vector<double> x(static_cast<std::size_t>(rows * cols));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < rows * cols; ++i) x[i] = quant_input_value(d, seed, cols, i);
  return x;
}

std::vector<double> make_quant_input(quant_dist d, std::uint64_t seed, std::int64_t rows, std::int64_t cols,
                                     const formats::scheme_config& c) {
  return d == quant_dist::m_ties ? make_tie_input(seed, c, rows, cols) : make_quant_input(d, seed, rows, cols);
}

shape2d parse_shape(std::string_view text, const std::string& place) {
  const auto x = text.find_first_of("xX");
  if (x == std::string_view::npos) return {1, parse_dim(text, text, place)};
  const shape2d s{parse_dim(text.substr(0, x), text, place), parse_dim(text.substr(x + 1), text, place)};
  if (s.rows > (std::int64_t{1} << 40) / s.cols)
    throw_input_error(place, "tensor too large (more than 2^40 elements)");
  return s;
}

}  // namespace numprobe::probes
