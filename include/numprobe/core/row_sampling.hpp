#pragma once
// Stratified row sampling for long contexts (DESIGN.md): first and last row of every query
// tile, rows whose key range ends exactly on a key-tile boundary or one past it, and seeded
// random rows. Cost of a probe stays O(rows x S x D).
#include <cstdint>
#include <vector>

#include "numprobe/core/attention_case.hpp"

namespace numprobe {

struct row_sampling {
  std::int64_t max_rows = 0;  // 0 = all rows ("--rows all")
  std::int64_t tile_q = 64;   // query tile of the kernel under test (strata)
  std::int64_t tile_k = 64;   // key tile of the kernel under test (strata)
  std::uint64_t seed = 1;
};

// Sorted, unique flat rows (b*T + t). With max_rows == 0 or >= rows(), every row. Otherwise
// at most max_rows rows, taken from the strata in order of priority and spread across the
// sequence, with seeded random rows filling the remaining budget.
[[nodiscard]] std::vector<std::int64_t> sample_rows(const attention_case& c, const row_sampling& s);

}  // namespace numprobe
