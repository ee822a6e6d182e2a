// Stratified row sampling (DESIGN.md, "long contexts use stratified row sampling").
// Strata, in order of priority:
//   1. the first and last row of every query tile (where tile-edge bugs live);
//   2. rows whose key range ends exactly on a key-tile boundary, or one past it (the full
//      and the one-element tail key tile);
//   3. seeded random rows.
// A stratum that does not fit the remaining budget is thinned evenly across the sequence, so
// a cap never keeps only the beginning. The structured strata may use at most 7/8 of the
// budget: a sample always keeps some random rows, which catch what no stratum anticipated.
#include "numprobe/core/row_sampling.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"

namespace numprobe {
namespace {

constexpr std::uint64_t k_sampling_stream = 0x726f7773616d706cULL;  // "rowsampl"

// Adds up to `budget` rows of `candidates` (sorted) that are not yet taken, evenly spread.
void take_spread(const std::vector<std::int64_t>& candidates, std::int64_t budget,
                 std::vector<char>& taken, std::vector<std::int64_t>& out) {
  std::vector<std::int64_t> fresh;
  for (const std::int64_t r : candidates)
    if (!taken[static_cast<std::size_t>(r)]) fresh.push_back(r);
  std::sort(fresh.begin(), fresh.end());
  fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
  const auto n = static_cast<std::int64_t>(fresh.size());
  if (budget <= 0 || n == 0) return;
  auto keep = [&](std::int64_t r) {
    taken[static_cast<std::size_t>(r)] = 1;
    out.push_back(r);
  };
  if (n <= budget) {
    for (const std::int64_t r : fresh) keep(r);
    return;
  }
  // Midpoints of `budget` equal slices of the candidate list: distinct since n > budget.
  for (std::int64_t i = 0; i < budget; ++i) keep(fresh[static_cast<std::size_t>((2 * i + 1) * n / (2 * budget))]);
}

}  // namespace

std::vector<std::int64_t> sample_rows(const attention_case& c, const row_sampling& s) {
  c.validate();
  if (s.max_rows < 0) throw_input_error("--rows", fmt::format("must be >= 0, got {}", s.max_rows));
  if (s.tile_q <= 0 || s.tile_k <= 0)
    throw_input_error("--tile", fmt::format("tiles must be positive, got {}x{}", s.tile_q, s.tile_k));
  const std::int64_t n_rows = c.rows(), n_queries = c.t();
  std::vector<std::int64_t> all(static_cast<std::size_t>(n_rows));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  if (s.max_rows == 0 || s.max_rows >= n_rows) return all;

  std::vector<std::int64_t> tile_edges, key_edges;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t t0 = 0; t0 < n_queries; t0 += s.tile_q) {
      tile_edges.push_back(b * n_queries + t0);
      tile_edges.push_back(b * n_queries + std::min(t0 + s.tile_q, n_queries) - 1);
    }
    for (std::int64_t t = 0; t < n_queries; ++t) {
      const key_range kr = case_key_range(c, b, t);
      if (kr.size() == 0) continue;
      const std::int64_t tail = kr.end % s.tile_k;
      if (tail == 0 || tail == 1) key_edges.push_back(b * n_queries + t);
    }
  }

  std::vector<char> taken(static_cast<std::size_t>(n_rows), 0);
  std::vector<std::int64_t> out;
  const std::int64_t structured = s.max_rows - s.max_rows / 8;
  take_spread(tile_edges, structured, taken, out);
  take_spread(key_edges, structured - static_cast<std::int64_t>(out.size()), taken, out);

  // Seeded random rows fill the rest: a partial Fisher-Yates shuffle of the untaken rows,
  // driven by the counter-based generator so the sample is a pure function of the seed.
  std::vector<std::int64_t> rest;
  rest.reserve(static_cast<std::size_t>(n_rows) - out.size());
  for (const std::int64_t r : all)
    if (!taken[static_cast<std::size_t>(r)]) rest.push_back(r);
  const auto need = std::min<std::size_t>(static_cast<std::size_t>(s.max_rows) - out.size(), rest.size());
  for (std::size_t i = 0; i < need; ++i) {
    const std::uint64_t h = counter_hash(s.seed, k_sampling_stream, i);
    const std::size_t j = i + static_cast<std::size_t>(h % (rest.size() - i));
    std::swap(rest[i], rest[j]);
    out.push_back(rest[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace numprobe
