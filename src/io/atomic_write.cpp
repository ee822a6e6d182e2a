#include "atomic_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "numprobe/base/error.hpp"

namespace numprobe::io::detail {

namespace {

void write_all(int fd, const std::vector<std::span<const std::byte>>& parts, const auto& fail) {
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
}

}  // namespace

void atomic_write(const std::filesystem::path& target,
                  const std::vector<std::span<const std::byte>>& parts) {
  static std::atomic<unsigned> counter{0};
  const std::string place = target.string();
  // A target that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO) is written
  // in place: renaming a temporary over it would replace the device or pipe with a plain file
  // (as root, /dev/null itself). A directory is refused by name.
  struct stat st{};
  if (::stat(place.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw_input_error(place, "is a directory, not a file to write");
    const int fd = ::open(place.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw_input_error(place, std::string("cannot open for writing: ") + std::strerror(errno));
    write_all(fd, parts, [&](const char* what) {
      const int e = errno;
      ::close(fd);
      throw_input_error(place, std::string(what) + ": " + std::strerror(e));
    });
    ::close(fd);
    return;
  }
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
  write_all(fd, parts, fail);
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
