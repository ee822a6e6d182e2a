// The scan's read-ahead thread (src/io/prefetch.hpp), both methods (pread, and
// posix_fadvise), on cached and on uncached pages alike (the first pass of a test reads the
// files, so later passes find them cached and take the no-copy branch): it reads the planned
// ranges in order, never more than `window` bytes past the consumer's position, passes over
// missing and short files without hanging, and stops promptly when destroyed half way.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "io_test_util.hpp"
#include "src/io/prefetch.hpp"

namespace numprobe::io {
namespace {

using test::scratch_dir;
using test::write_file;

// A file of n bytes (contents irrelevant: the reader discards them; not zeros anyway).
std::filesystem::path file_of(const std::filesystem::path& dir, const char* name, std::size_t n) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = std::byte((i * 131 + 7) & 0xFF);
  const auto p = dir / name;
  write_file(p, b);
  return p;
}

using method = prefetcher::options::method;
struct variant {
  method how;
  bool evict;  // drop the files' pages first: pread waits for the disk instead of finding them
};
constexpr variant k_variants[] = {{method::m_read, true}, {method::m_read, false}, {method::m_advise, true}};

// Written data goes to disk, then its pages leave the page cache (a hint the kernel follows
// for clean, unmapped pages; if it kept some, the cached branch runs, which is also correct).
void evict(const std::vector<std::filesystem::path>& files) {
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

TEST(prefetch, reads_every_range_once_the_consumer_allows_it) {
  const auto dir = scratch_dir();
  const auto a = file_of(dir, "a.bin", 100'000), b = file_of(dir, "b.bin", 70'010);
  // Ranges that do not start on a chunk or page boundary; 4096-byte chunks cross them.
  const std::vector<file_range> plan{{a, 1'000, 50'000}, {b, 3, 70'000}, {a, 60'000, 40'000}};
  const std::uint64_t total = 160'000;
  for (const auto [how, drop] : k_variants) {
    SCOPED_TRACE(std::to_string(static_cast<int>(how)) + (drop ? " evicted" : " cached"));
    if (drop) evict({a, b});
    prefetcher p(plan, {.window = total, .chunk = 4096, .how = how});
    p.wait_idle();
    EXPECT_EQ(p.fetched(), total);
    EXPECT_EQ(p.bytes_read(), total);
  }
}

TEST(prefetch, never_reads_past_the_consumer_plus_the_window) {
  const auto dir = scratch_dir();
  const auto a = file_of(dir, "a.bin", 200'000);
  const std::vector<file_range> plan{{a, 0, 120'000}, {a, 120'000, 80'000}};
  for (const auto [how, drop] : k_variants) {
    SCOPED_TRACE(std::to_string(static_cast<int>(how)) + (drop ? " evicted" : " cached"));
    if (drop) evict({a});
    // The window (10'000) is not a multiple of the chunk (4096): the read that reaches it is
    // cut to end exactly there.
    prefetcher p(plan, {.window = 10'000, .chunk = 4096, .how = how});
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 10'000u);
    p.consumed(5'000);
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 15'000u);
    p.consumed(4'000);  // backwards: ignored
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 15'000u);
    p.consumed(115'000);  // the window reaches into the second range
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 125'000u);
    p.consumed(200'000);
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 200'000u);
    EXPECT_EQ(p.bytes_read(), 200'000u);
  }
}

TEST(prefetch, missing_and_truncated_files_end_their_ranges_early) {
  const auto dir = scratch_dir();
  const auto a = file_of(dir, "a.bin", 30'000), b = file_of(dir, "b.bin", 20'000);
  // b is 20'000 bytes but its range claims 50'000 (a file truncated after the header was read);
  // c does not exist; a's range after them is read in full; the last range ends 100 bytes past
  // b's end, inside b's last page (cached, that page must not count the missing bytes).
  const std::vector<file_range> plan{{b, 1'000, 50'000}, {dir / "c.bin", 0, 10'000}, {a, 0, 30'000},
                                     {b, 40'000, 5'000}, {b, 19'500, 600}};
  for (const auto [how, drop] : k_variants) {
    SCOPED_TRACE(std::to_string(static_cast<int>(how)) + (drop ? " evicted" : " cached"));
    if (drop) evict({a, b});
    prefetcher p(plan, {.window = 1 << 20, .chunk = 4096, .how = how});
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 95'600u);  // every range passed
    // b from 1'000 to its end, all of a, b's last 500 bytes.
    EXPECT_EQ(p.bytes_read(), 19'000u + 30'000u + 500u);
  }
}

TEST(prefetch, empty_plan_or_zero_window_does_nothing_and_destruction_is_prompt) {
  const auto dir = scratch_dir();
  const auto a = file_of(dir, "a.bin", 50'000);
  {
    prefetcher p({}, {});
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 0u);
  }
  {
    prefetcher p({{a, 0, 50'000}}, {.window = 0});
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 0u);
  }
  // Destroyed while waiting for a consumer that never comes: the destructor wakes and joins it
  // (a reader that missed the wake-up would hang here, and ctest's timeout would report it).
  {
    prefetcher p({{a, 0, 50'000}}, {.window = 8'192, .chunk = 4096});
    p.wait_idle();
    EXPECT_EQ(p.fetched(), 8'192u);
  }
}

}  // namespace
}  // namespace numprobe::io
