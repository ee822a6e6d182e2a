#include "src/io/prefetch.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
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
  // Each file opened once (-1: cannot be), with its size then.
  struct file {
    int fd = -1;
    std::uint64_t size = 0;
  };
  std::map<std::filesystem::path, file> files;
  const auto file_of = [&](const std::filesystem::path& p) -> const file& {
    auto [it, added] = files.try_emplace(p);
    if (added) {
      it->second.fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
      struct stat st {};
      if (it->second.fd >= 0 && ::fstat(it->second.fd, &st) == 0)
        it->second.size = static_cast<std::uint64_t>(st.st_size);
    }
    return it->second;
  };
  // The advice cursor: POSIX_FADV_WILLNEED has been given for the plan's bytes before
  // `advised` (range `adv_range`, `adv_done` bytes into it). It runs up to the window's end,
  // across ranges and files, so the disk has many requests at once (a lone sequential reader
  // keeps only the kernel's read-ahead in flight); the read cursor then waits for, or finds,
  // the pages in order.
  std::size_t adv_range = 0;
  std::uint64_t adv_done = 0, advised = 0;
  const auto advise_to = [&](std::uint64_t limit) {
    while (advised < limit && adv_range < m_plan.size()) {
      const auto& r = m_plan[adv_range];
      const std::uint64_t len = std::min<std::uint64_t>({r.length - adv_done, limit - advised, 32u << 20});
      const file& f = file_of(r.path);
      const std::uint64_t at = r.offset + adv_done;
      if (f.fd >= 0 && at < f.size)
        ::posix_fadvise(f.fd, static_cast<off_t>(at), static_cast<off_t>(std::min(len, f.size - at)),
                        POSIX_FADV_WILLNEED);
      adv_done += len;
      advised += len;
      if (adv_done == r.length) {
        ++adv_range;
        adv_done = 0;
      }
    }
  };

  std::uint64_t start = 0;  // the current range's first plan byte
  for (const auto& r : m_plan) {
    const file& f = file_of(r.path);
    std::uint64_t done = 0;  // of this range
    while (done < r.length) {
      std::uint64_t len = 0, limit = 0;
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
        limit = m_consumed + m_o.window;
        len = std::min<std::uint64_t>({r.length - done, m_o.chunk, limit - (start + done)});
      }
      // Only what the file holds counts as read (a short file ends the range).
      const std::uint64_t at = r.offset + done;
      const std::uint64_t avail = at < f.size ? std::min<std::uint64_t>(len, f.size - at) : 0;
      ssize_t n = -1;
      if (f.fd < 0 || avail == 0) {
        n = 0;
      } else if (m_o.how == options::method::m_advise) {
        advise_to(start + done + avail);
        n = static_cast<ssize_t>(avail);
      } else {
        advise_to(limit);
        if (resident(f.fd, at, avail)) {
          n = static_cast<ssize_t>(avail);  // cached already: nothing to wait for, nothing to copy
        } else {
          do {
            n = ::pread(f.fd, buf.get(), avail, static_cast<off_t>(at));
          } while (n < 0 && errno == EINTR);
        }
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
    {
      std::lock_guard lock(m_mu);
      if (m_stop) break;
    }
    start += r.length;
  }
  for (const auto& [path, f] : files)
    if (f.fd >= 0) ::close(f.fd);
  std::lock_guard lock(m_mu);
  m_finished = true;
  m_idle = true;
  m_cv.notify_all();
}

}  // namespace numprobe::io
