#include "src/io/prefetch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

namespace numprobe::io {

prefetcher::prefetcher(std::vector<file_range> plan, options o) : m_plan(std::move(plan)), m_o(o) {
  m_o.chunk = std::max<std::size_t>(m_o.chunk, 4096);
  if (m_plan.empty() || m_o.window == 0) {
    m_idle = m_finished = true;
    return;
  }
  m_thread = std::thread([this] { run(); });
}

prefetcher::~prefetcher() {
  {
    std::lock_guard lock(m_mu);
    m_stop = true;
  }
  m_cv.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void prefetcher::consumed(std::uint64_t position) {
  {
    std::lock_guard lock(m_mu);
    if (position <= m_consumed) return;
    m_consumed = position;
    if (!m_finished) m_idle = false;  // until the reader has looked at the new window
  }
  m_cv.notify_all();
}

std::uint64_t prefetcher::fetched() const {
  std::lock_guard lock(m_mu);
  return m_fetched;
}

std::uint64_t prefetcher::bytes_read() const {
  std::lock_guard lock(m_mu);
  return m_read;
}

void prefetcher::wait_idle() const {
  std::unique_lock lock(m_mu);
  m_cv.wait(lock, [&] { return m_idle; });
}

void prefetcher::run() {
  const auto buf = std::make_unique<std::byte[]>(m_o.chunk);
  std::uint64_t start = 0;  // the current range's first plan byte
  for (const auto& r : m_plan) {
    const int fd = ::open(r.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) ::posix_fadvise(fd, static_cast<off_t>(r.offset), static_cast<off_t>(r.length),
                                 POSIX_FADV_SEQUENTIAL);
    std::uint64_t done = 0;  // of this range
    while (done < r.length) {
      std::uint64_t len = 0;
      {
        std::unique_lock lock(m_mu);
        // Room in the window: the next read ends at most at consumed + window.
        const auto room = [&] { return m_consumed + m_o.window > start + done; };
        while (!m_stop && !room()) {
          m_idle = true;  // (again after every wake-up: consumed() clears it)
          m_cv.notify_all();
          m_cv.wait(lock);
        }
        m_idle = false;
        if (m_stop) break;
        len = std::min<std::uint64_t>({r.length - done, m_o.chunk, m_consumed + m_o.window - (start + done)});
      }
      ssize_t n = -1;
      if (fd >= 0) {
        do {
          n = ::pread(fd, buf.get(), len, static_cast<off_t>(r.offset + done));
        } while (n < 0 && errno == EINTR);
      }
      std::lock_guard lock(m_mu);
      if (n <= 0) {  // missing, short or failing file: the rest of the range counts as passed
        m_fetched += r.length - done;
        done = r.length;
        break;
      }
      done += static_cast<std::uint64_t>(n);
      m_fetched += static_cast<std::uint64_t>(n);
      m_read += static_cast<std::uint64_t>(n);
    }
    if (fd >= 0) ::close(fd);
    {
      std::lock_guard lock(m_mu);
      if (m_stop) break;
    }
    start += r.length;
  }
  std::lock_guard lock(m_mu);
  m_finished = true;
  m_idle = true;
  m_cv.notify_all();
}

}  // namespace numprobe::io
