// scan_shard_of (issue 32 A): tensors split by bytes in name order, each in exactly one shard.
#include <gtest/gtest.h>

#include "probes/scan/scan_probe.hpp"

namespace {

using numprobe::probes::scan_shard_of;

TEST(scan_shard, equal_tensors_split_evenly_in_name_order) {
  // Given out of name order: the assignment follows the names, not the order given.
  const std::vector<std::string> names = {"f", "a", "d", "b", "e", "c"};
  const auto s = scan_shard_of(names, std::vector<std::uint64_t>(6, 100), 3);
  EXPECT_EQ(s, (std::vector<int>{2, 0, 1, 0, 2, 1}));
}

TEST(scan_shard, a_large_tensor_takes_its_bytes_share) {
  // 600 bytes: "big" covers [0, 300), its middle byte 150 is in shard 0 of 2; the four 75-byte
  // tensors cover [300, 600) -> shard 1.
  const std::vector<std::string> names = {"big", "x1", "x2", "x3", "x4"};
  const auto s = scan_shard_of(names, {300, 75, 75, 75, 75}, 2);
  EXPECT_EQ(s, (std::vector<int>{0, 1, 1, 1, 1}));
  // Three shards of 200 bytes: big's middle (150) in shard 0; x1 [300,375) mid 337 -> 1;
  // x2 mid 412 -> 2 (412*3/600 = 2.06); x3, x4 -> 2.
  EXPECT_EQ(scan_shard_of(names, {300, 75, 75, 75, 75}, 3), (std::vector<int>{0, 1, 2, 2, 2}));
}

TEST(scan_shard, more_shards_than_tensors_and_one_shard) {
  const std::vector<std::string> names = {"a", "b", "c"};
  const auto s = scan_shard_of(names, {10, 10, 10}, 7);
  // middles 5, 15, 25 of 30: shards 1, 3, 5.
  EXPECT_EQ(s, (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(scan_shard_of(names, {10, 10, 10}, 1), (std::vector<int>{0, 0, 0}));
}

}  // namespace
