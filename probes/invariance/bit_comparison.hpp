#pragma once
// Bit-for-bit comparison of two outputs of the same query rows (issue 30): how many elements
// differ, by how many ulps of the output dtype, and where the first difference sits.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "numprobe/formats/format.hpp"

namespace numprobe::probes {

// Where an element of O sits: the query position t within its sequence, the head, the channel.
struct element_position {
  std::int64_t row = -1;  // -1: no element
  std::int64_t head = 0;
  std::int64_t dim = 0;
  double a = 0.0, b = 0.0;  // the two values
  double ulp = 0.0;
};

// Histogram bins of ulp differences: bin 0 holds differing bits of equal value (+0 and -0),
// bin k >= 1 holds (2^(k-2), 2^(k-1)] ulps (1, 2, 3-4, 5-8, ...), the last bin non-finite
// differences (NaN or Inf on one side only, or of another sign).
inline constexpr std::size_t k_ulp_bins = 34;
[[nodiscard]] std::string ulp_bin_label(std::size_t bin);

struct bit_comparison {
  std::int64_t compared = 0;
  std::int64_t differing = 0;
  double max_ulp = 0.0;  // +inf when a difference is non-finite
  std::vector<std::int64_t> histogram = std::vector<std::int64_t>(k_ulp_bins, 0);
  element_position first;

  // Adds another comparison's counts (the first difference stays the earlier one).
  void merge(const bit_comparison& o);
  // {"1": 12, "3-4": 2, ...}: the non-empty bins.
  [[nodiscard]] nlohmann::json histogram_json() const;
};

// Distance in ulps of `dtype` between two values representable in it: the number of steps of
// its grid between them (subnormals included), +inf when either is not finite.
[[nodiscard]] double ulp_distance(formats::format_id dtype, double a, double b);

// Compares O of rows laid out [rows, heads, dim] bit for bit (as doubles: every dtype's values
// are exact in them). `positions[i]` is row i's query position within its sequence.
[[nodiscard]] bit_comparison compare_bits(formats::format_id dtype, std::span<const double> a,
                                          std::span<const double> b, std::span<const std::int64_t> positions,
                                          std::int64_t heads, std::int64_t dim);

}  // namespace numprobe::probes
