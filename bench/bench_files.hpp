#pragma once
// File helpers shared by the streaming benchmarks (bench_kl, bench_scan): the plain sequential
// read() baseline (and one with deep read-ahead) and dropping a file's pages from the page cache, so a "cold" pass reads the
// disk the way a first look at a fresh checkpoint or logit dump does.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace bench {

// fdatasync, then POSIX_FADV_DONTNEED over the whole file: its clean pages leave the cache.
inline void drop_cache(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    const int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// Seconds to read() the files front to back in 4 MiB calls; `bytes` gets the total.
inline double read_seconds(const std::vector<std::string>& paths, double& bytes) {
  std::vector<char> buf(4 << 20);
  bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& p : paths) {
    const int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) continue;
    while (true) {
      const auto r = ::read(fd, buf.data(), buf.size());
      if (r <= 0) break;
      bytes += static_cast<double>(r);
    }
    ::close(fd);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The same read() loop with the kernel asked (POSIX_FADV_WILLNEED) to keep reading up to
// `window` bytes ahead of it: more requests in flight, which some disks (virtual ones among
// them) reward. A stronger baseline than read_seconds for a reader that reads ahead itself.
inline double read_ahead_seconds(const std::vector<std::string>& paths, double& bytes,
                                 std::size_t window = std::size_t{512} << 20) {
  constexpr std::size_t chunk = 4 << 20;
  std::vector<char> buf(chunk);
  bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& p : paths) {
    const int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    std::size_t pos = 0, asked = 0;
    while (true) {
      for (; asked < pos + window; asked += chunk)
        ::posix_fadvise(fd, static_cast<off_t>(asked), chunk, POSIX_FADV_WILLNEED);
      const auto r = ::read(fd, buf.data(), buf.size());
      if (r <= 0) break;
      pos += static_cast<std::size_t>(r);
      bytes += static_cast<double>(r);
    }
    ::close(fd);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace bench
