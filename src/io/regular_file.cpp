#include "numprobe/io/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "numprobe/base/error.hpp"

namespace numprobe::io {

std::optional<std::string> why_not_regular(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    switch (errno) {
      case ENOENT: return "no such file";
      case ENOTDIR: return "no such file (a component of the path is not a directory)";
      case ELOOP: return "symbolic link loop (too many levels of symbolic links), not a regular file";
      case EACCES: return "permission denied";
      case ENAMETOOLONG: return "file name too long";
      default: return std::string("cannot stat: ") + std::strerror(errno);
    }
  }
  if (S_ISREG(st.st_mode)) return std::nullopt;
  if (S_ISDIR(st.st_mode)) return "is a directory, not a regular file";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(st.st_mode)) return "is a character device, not a regular file";
  if (S_ISBLK(st.st_mode)) return "is a block device, not a regular file";
  if (S_ISSOCK(st.st_mode)) return "is a socket, not a regular file";
  return "not a regular file";
}

void require_regular_file(const std::filesystem::path& path) {
  if (auto why = why_not_regular(path)) throw_input_error(path.string(), *why);
}

std::string read_text_file(const std::filesystem::path& path, std::size_t max_bytes,
                           const std::string& what) {
  const std::string place = path.string();
  require_regular_file(path);
  // O_NONBLOCK: should the path be swapped for a FIFO after the check, open does not wait for
  // a writer, and fstat below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_input_error(place, "cannot open the " + what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_input_error(place, "not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw_input_error(place, "the " + what + " is " + std::to_string(st.st_size) +
                                 " bytes, more than the " + std::to_string(max_bytes) +
                                 "-byte limit for one");
  }
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t at = 0;
  while (at < text.size()) {
    const auto n = ::read(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw_input_error(place, "cannot read the " + what + ": " + std::strerror(e));
    }
    if (n == 0) break;  // shrank while reading: take what is there
    at += static_cast<std::size_t>(n);
  }
  text.resize(at);
  ::close(fd);
  return text;
}

}  // namespace numprobe::io
