#pragma once
// Private helpers shared by the reference's entry points: argument checks and an accurate sum.
#include <cstdint>
#include <span>
#include <string_view>

#include "numprobe/core/attention_case.hpp"

namespace numprobe::reference::detail {

// Throws an input error naming `who` and the offending argument when the tensors do not match
// the case (sizes), or a requested row lies outside [0, B*T). Validates the case itself too.
void check_attention_args(const attention_case& c, std::span<const double> q_rows,
                          std::span<const std::int64_t> rows, std::span<const double> k,
                          std::span<const double> v, std::string_view who);

// Pairwise summation over 8 interleaved partial sums at the leaves: the error bound is
// about (16 + log2(n / 128)) unit roundoffs instead of n for a running sum, which keeps a
// 128K-key row sum far below 1e-12, and the leaf loop still vectorises without reassociation.
[[nodiscard]] inline double pairwise_sum(const double* x, std::int64_t n) {
  constexpr std::int64_t k_leaf = 128;
  if (n > k_leaf) {
    const std::int64_t half = (n / 2 + 7) / 8 * 8;
    return pairwise_sum(x, half) + pairwise_sum(x + half, n - half);
  }
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += x[i + l];
  double tail = 0;
  for (; i < n; ++i) tail += x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

}  // namespace numprobe::reference::detail
