#pragma once
// A background reader that keeps the page cache filled a bounded window ahead of a consumer
// walking a planned sequence of file ranges (the scan's tensors, shard after shard), so the
// disk works while the consumer's threads compute instead of stalling in page faults.
//
// It asks the kernel to read everything up to the window's end (POSIX_FADV_WILLNEED), then
// reads each range front to back with pread(2) in `chunk`-byte calls into one scratch buffer,
// so that it waits for the pages in order, and throws the bytes away: what it leaves behind
// is the file's pages in the page cache, where the consumer's memory map then finds them
// (minor faults, no disk wait). It never reads nor asks for bytes past `consumed + window` of
// the plan (the ranges laid end to end), so the cache it fills ahead is bounded by `window`,
// and its own memory is one chunk; it touches none of the consumer's mappings (its resident
// set does not grow). Purely advisory: a file that is missing, shorter than its range or
// failing to read just ends that range early (the consumer reports such errors itself), and
// results never depend on it.
// Private to numprobe (the scan probe uses it): not installed.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

namespace numprobe::io {

struct file_range {
  std::filesystem::path path;
  std::uint64_t offset = 0, length = 0;
};

class prefetcher {
 public:
  struct options {
    std::uint64_t window = std::uint64_t{512} << 20;  // bytes read ahead of the consumer
    std::size_t chunk = std::size_t{4} << 20;         // bytes per call
    // read: posix_fadvise(WILLNEED) up to the window's end (many disk requests in flight),
    // then pread(2) of each chunk in order into a scratch buffer, waiting for the disk,
    // except for chunks whose pages are all cached already (mincore), passed without a copy;
    // advise: the WILLNEED only, chunk by chunk (starts the disk reads and returns; the
    // consumer may then wait on pages still in flight).
    enum class method : std::uint8_t { m_read, m_advise } how = method::m_read;
  };

  // Starts the reader thread on `plan` (nothing happens for an empty plan or window 0).
  prefetcher(std::vector<file_range> plan, options o);
  ~prefetcher();  // stops after the pread in flight, joins
  prefetcher(const prefetcher&) = delete;
  prefetcher& operator=(const prefetcher&) = delete;

  // The consumer is done with the plan's first `position` bytes (monotone; smaller values
  // are ignored), which lets the reader go on to position + window.
  void consumed(std::uint64_t position);

  // Plan bytes the reader has got through (read, or skipped as unreadable); for tests and
  // benchmarks.
  [[nodiscard]] std::uint64_t fetched() const;
  // Bytes actually read from the files (excludes ranges cut short by a missing or short file).
  [[nodiscard]] std::uint64_t bytes_read() const;
  // Blocks until the reader waits for the consumer (window full) or has finished the plan.
  void wait_idle() const;

 private:
  void run();

  std::vector<file_range> m_plan;
  options m_o;
  mutable std::mutex m_mu;
  mutable std::condition_variable m_cv;  // consumer progress, stop, reader idle
  std::uint64_t m_consumed = 0, m_fetched = 0, m_read = 0;
  bool m_stop = false, m_idle = false, m_finished = false;
  std::thread m_thread;
};

}  // namespace numprobe::io
