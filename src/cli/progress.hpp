#pragma once
// A progress line on stderr, shown only when stderr is a terminal.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace numprobe::cli {

class progress_bar {
 public:
  // `shown` false: never drawn (the ranks other than 0 under --mpi).
  explicit progress_bar(bool shown = true)
      : m_enabled(shown && ::isatty(STDERR_FILENO) != 0), m_t0(std::chrono::steady_clock::now()) {}
  ~progress_bar() { finish(); }

  void update(std::size_t done, std::size_t total, const std::string& what) {
    if (!m_enabled || total == 0) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_t0).count();
    // Work per point grows with length, so the estimate from the mean point is a lower bound.
    const double eta = done ? el / static_cast<double>(done) * static_cast<double>(total - done) : 0.0;
    const int width = 24;
    const int fill = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu %s  %.1fs elapsed, ~%.0fs left   ", fill,
                 "########################", width - fill, "", done, total, what.c_str(), el, eta);
    std::fflush(stderr);
    m_drawn = true;
  }
  void finish() {
    if (m_drawn) std::fprintf(stderr, "\r\033[K");
    m_drawn = false;
  }

 private:
  bool m_enabled;
  bool m_drawn = false;
  std::chrono::steady_clock::time_point m_t0;
};

}  // namespace numprobe::cli
