#include "src/io/prefetch.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <vector>

namespace numprobe::io {
namespace {

// Whether every page of [offset, offset + length) of the file is in the page cache (mincore on
// a throw-away mapping of the range; false when that cannot be told).
bool resident(int fd, std::uint64_t offset, std::uint64_t length) {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t begin = offset / page * page;
  const std::uint64_t span = offset + length - begin;
  void* p = ::mmap(nullptr, span, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(begin));
  if (p == MAP_FAILED) return false;
  std::vector<unsigned char> in((span + page - 1) / page);
  bool all = ::mincore(p, span, in.data()) == 0;
  for (std::size_t i = 0; all && i < in.size(); ++i) all = (in[i] & 1) != 0;
  ::munmap(p, span);
  return all;
}

}  // namespace

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
  const auto buf = std::make_unique<std::byte[]>(m_o.how == options::method::m_read ? m_o.chunk : 1);
  std::uint64_t start = 0;  // the current range's first plan byte
  for (const auto& r : m_plan) {
    const int fd = ::open(r.path.c_str(), O_RDONLY | O_CLOEXEC);
    std::uint64_t file_size = 0;
    if (fd >= 0) {
      struct stat st {};
      if (::fstat(fd, &st) == 0) file_size = static_cast<std::uint64_t>(st.st_size);
      ::posix_fadvise(fd, static_cast<off_t>(r.offset), static_cast<off_t>(r.length),
                      POSIX_FADV_SEQUENTIAL);
    }
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
      // Only what the file holds counts as read (a short file ends the range).
      const std::uint64_t at = r.offset + done;
      const std::uint64_t avail = at < file_size ? std::min<std::uint64_t>(len, file_size - at) : 0;
      ssize_t n = -1;
      if (fd < 0 || avail == 0) {
        n = 0;
      } else if (m_o.how == options::method::m_advise) {
        ::posix_fadvise(fd, static_cast<off_t>(at), static_cast<off_t>(avail), POSIX_FADV_WILLNEED);
        n = static_cast<ssize_t>(avail);
      } else if (resident(fd, at, avail)) {
        n = static_cast<ssize_t>(avail);  // cached already: nothing to wait for, nothing to copy
      } else {
        do {
          n = ::pread(fd, buf.get(), avail, static_cast<off_t>(at));
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
