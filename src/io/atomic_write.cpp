#include "atomic_write.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "numprobe/core/error.hpp"

namespace numprobe::io::detail {

void atomic_write(const std::filesystem::path& target,
                  const std::vector<std::span<const std::byte>>& parts) {
  static std::atomic<unsigned> counter{0};
  const std::string place = target.string();
  // pid + counter: two processes, or two threads, never share a temporary name.
  const std::string tmp = place + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw_input_error(place, std::string("cannot create: ") + std::strerror(errno));
  auto fail = [&](const char* what) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw_input_error(place, std::string(what) + ": " + std::strerror(e));
  };
  for (const auto& part : parts) {
    const std::byte* p = part.data();
    std::size_t left = part.size();
    while (left > 0) {
      const ::ssize_t w = ::write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("cannot write");
      p += w;
      left -= static_cast<std::size_t>(w);
    }
  }
  if (::fsync(fd) != 0) fail("cannot flush");
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_input_error(place, std::string("cannot close: ") + std::strerror(e));
  }
  if (::rename(tmp.c_str(), place.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_input_error(place, std::string("cannot rename into place: ") + std::strerror(e));
  }
}

}  // namespace numprobe::io::detail
