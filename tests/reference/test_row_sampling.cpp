// Stratified row sampling (DESIGN.md): the properties probes rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "numprobe/base/error.hpp"
#include "numprobe/core/row_sampling.hpp"
#include "reference/reference_cases.hpp"
#include "reference/reference_test_support.hpp"

namespace numprobe::test {
namespace {

struct sampling_case {
  attention_case c;
  row_sampling s;
  std::string name() const {
    return gtest_name(c.id()) + "_rows_" + std::to_string(s.max_rows) + "_tile_" +
           std::to_string(s.tile_q) + "x" + std::to_string(s.tile_k);
  }
};

std::vector<sampling_case> sampling_cases() {
  std::vector<sampling_case> out;
  auto c1 = make_case(4096, 4096, 1, 1, 8, mask_kind::m_causal);
  out.push_back({c1, {.max_rows = 256, .tile_q = 64, .tile_k = 64, .seed = 5}});   // tiles fit
  out.push_back({c1, {.max_rows = 64, .tile_q = 64, .tile_k = 128, .seed = 5}});   // capped
  auto c2 = make_case(1000, 1537, 1, 1, 8, mask_kind::m_none);
  c2.batch = 3;
  out.push_back({c2, {.max_rows = 200, .tile_q = 128, .tile_k = 64, .seed = 9}});
  auto c3 = make_case(300, 200, 1, 1, 8, mask_kind::m_window);
  c3.window = 70;
  out.push_back({c3, {.max_rows = 40, .tile_q = 16, .tile_k = 32, .seed = 2}});
  return out;
}

class sampling : public ::testing::TestWithParam<sampling_case> {};

TEST_P(sampling, properties) {
  const auto& [c, s] = GetParam();
  const auto rows = sample_rows(c, s);
  // Sorted, unique, in range, capped.
  ASSERT_FALSE(rows.empty());
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  EXPECT_EQ(std::adjacent_find(rows.begin(), rows.end()), rows.end());
  EXPECT_GE(rows.front(), 0);
  EXPECT_LT(rows.back(), c.rows());
  EXPECT_LE(static_cast<std::int64_t>(rows.size()), s.max_rows);
  // Deterministic in the seed; another seed changes the random rows.
  EXPECT_EQ(sample_rows(c, s), rows);
  row_sampling other = s;
  other.seed = s.seed + 1;
  EXPECT_NE(sample_rows(c, other), rows);

  // The first and last rows of every query tile, when the budget holds them all.
  std::vector<std::int64_t> edges;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t t0 = 0; t0 < c.t(); t0 += s.tile_q) {
      edges.push_back(b * c.t() + t0);
      edges.push_back(b * c.t() + std::min(t0 + s.tile_q, c.t()) - 1);
    }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  const std::set<std::int64_t> got(rows.begin(), rows.end());
  const auto n_edges = static_cast<std::int64_t>(edges.size());
  if (n_edges <= s.max_rows - s.max_rows / 8) {
    for (const std::int64_t r : edges) EXPECT_TRUE(got.count(r)) << "tile edge row " << r;
    EXPECT_EQ(static_cast<std::int64_t>(rows.size()), s.max_rows);  // the budget is used
  } else {
    // Capped: the tile edges kept are spread over the whole sequence, not its start.
    std::int64_t kept = 0;
    for (const std::int64_t r : edges) kept += got.count(r);
    EXPECT_GE(kept, (s.max_rows - s.max_rows / 8) * 9 / 10);
    EXPECT_LT(rows.front(), c.rows() / 8);
    EXPECT_GT(rows.back(), c.rows() * 7 / 8);
  }
}

INSTANTIATE_TEST_SUITE_P(cases, sampling, ::testing::ValuesIn(sampling_cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(sampling_all_rows, zero_or_large_budget_gives_every_row) {
  auto c = make_case(100, 80, 1, 1, 8, mask_kind::m_causal);
  c.batch = 2;
  for (const std::int64_t max_rows : {std::int64_t{0}, c.rows(), c.rows() + 5}) {
    const auto rows = sample_rows(c, {.max_rows = max_rows, .tile_q = 64, .tile_k = 64, .seed = 1});
    ASSERT_EQ(static_cast<std::int64_t>(rows.size()), c.rows());
    for (std::int64_t i = 0; i < c.rows(); ++i) EXPECT_EQ(rows[static_cast<std::size_t>(i)], i);
  }
}

// Rows whose key range ends on a key-tile boundary or one past it are taken when they fit:
// causal T = S = 300 has ends t + 1, so t in {63, 64, 127, 128, 191, 192, 255, 256}.
TEST(sampling_key_edges, key_tile_boundary_rows_are_included) {
  const auto c = make_case(300, 300, 1, 1, 8, mask_kind::m_causal);
  const auto rows = sample_rows(c, {.max_rows = 64, .tile_q = 100, .tile_k = 64, .seed = 1});
  const std::set<std::int64_t> got(rows.begin(), rows.end());
  for (const std::int64_t t : {63, 64, 127, 128, 191, 192, 255, 256}) EXPECT_TRUE(got.count(t)) << t;
  EXPECT_TRUE(got.count(0));  // the first key ends at 1 = 0 * 64 + 1
}

TEST(sampling_arguments, bad_tiles_and_budget_are_input_errors) {
  const auto c = make_case(10, 10, 1, 1, 8, mask_kind::m_none);
  EXPECT_THROW((void)sample_rows(c, {.max_rows = 4, .tile_q = 0, .tile_k = 64, .seed = 1}), numprobe::error);
  EXPECT_THROW((void)sample_rows(c, {.max_rows = -1, .tile_q = 64, .tile_k = 64, .seed = 1}), numprobe::error);
}

}  // namespace
}  // namespace numprobe::test
