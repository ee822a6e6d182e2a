#include "numprobe/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "numprobe/base/error.hpp"
#include "numprobe/io/regular_file.hpp"

namespace numprobe::io {

std::shared_ptr<const mapped_file> mapped_file::open(const std::filesystem::path& path) {
  const std::string source = path.string();
  // Before open: opening a FIFO blocks until a writer appears, and a device never ends.
  require_regular_file(path);
  const int fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_input_error(source, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_input_error(source, "not a regular file");
  }
  std::shared_ptr<mapped_file> f(new mapped_file());
  f->m_source = source;
  f->m_size = static_cast<std::size_t>(st.st_size);
  if (f->m_size > 0) {
    void* p = ::mmap(nullptr, f->m_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw_input_error(source, std::string("cannot map: ") + std::strerror(e));
    }
    f->m_data = static_cast<const std::byte*>(p);
    f->m_mapped = true;
    // Tensor passes read front to back; ask for aggressive read-ahead.
    ::madvise(p, f->m_size, MADV_SEQUENTIAL);
  }
  ::close(fd);  // the mapping keeps the file alive
  return f;
}

std::shared_ptr<const mapped_file> mapped_file::from_bytes(std::span<const std::byte> bytes,
                                                           std::string source) {
  std::shared_ptr<mapped_file> f(new mapped_file());
  f->m_source = std::move(source);
  f->m_size = bytes.size();
  if (!bytes.empty()) {
    f->m_copy = std::make_unique<std::byte[]>(bytes.size());
    std::memcpy(f->m_copy.get(), bytes.data(), bytes.size());
    f->m_data = f->m_copy.get();
  }
  return f;
}

mapped_file::~mapped_file() {
  if (m_mapped) ::munmap(const_cast<std::byte*>(m_data), m_size);
}

void mapped_file::release_pages(std::size_t offset, std::size_t length) const noexcept {
  if (!m_mapped || offset >= m_size) return;
  if (length > m_size - offset) length = m_size - offset;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  // Only whole pages inside the range: a neighbouring tensor may still be in use.
  const std::size_t begin = (offset + page - 1) / page * page;
  const std::size_t end = (offset + length) / page * page;
  if (end > begin) {
    ::madvise(const_cast<std::byte*>(m_data) + begin, end - begin, MADV_DONTNEED);
  }
}

void mapped_file::will_need(std::size_t offset, std::size_t length) const noexcept {
  if (!m_mapped || offset >= m_size) return;
  if (length > m_size - offset) length = m_size - offset;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t begin = offset / page * page;  // outward: partial pages are read anyway
  const std::size_t end = std::min(m_size, (offset + length + page - 1) / page * page);
  if (end > begin) ::madvise(const_cast<std::byte*>(m_data) + begin, end - begin, MADV_WILLNEED);
}

}  // namespace numprobe::io
