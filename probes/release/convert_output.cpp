// What `convert --write` leaves when it does not complete: convert_output.hpp.
#include "probes/release/convert_output.hpp"

#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <system_error>

namespace numprobe::probes {
namespace {

std::atomic<int> g_convert_hangup{0};

extern "C" void convert_on_hangup(int sig) {
  // The second one ends the process at once (its default action), as a second SIGINT does.
  if (g_convert_hangup.exchange(sig) != 0) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

}  // namespace

convert_signal_guard::convert_signal_guard() {
  g_convert_hangup.store(0);
  struct sigaction sa {};
  sa.sa_handler = &convert_on_hangup;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the writing loops poll; a write(2) in progress just continues
  ::sigaction(SIGHUP, &sa, &m_old_hangup);
}

convert_signal_guard::~convert_signal_guard() { ::sigaction(SIGHUP, &m_old_hangup, nullptr); }

void throw_if_convert_interrupted() {
  throw_if_interrupted();
  if (const int s = g_convert_hangup.load()) throw interrupted(s);
}

std::size_t partial_output::remove() noexcept {
  if (m_kept || m_removed) return 0;
  m_removed = true;
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& f : m_files) n += std::filesystem::remove(m_dir / f, ec) ? 1 : 0;
  // Only an empty folder: anything else in it is not ours.
  if (m_created) std::filesystem::remove(m_dir, ec);
  return n;
}

std::string partial_output::removed_note(std::size_t removed) const {
  if (m_files.empty()) return "";  // nothing was written (an empty OUT of this run's is gone)
  std::error_code ec;
  const bool folder_gone = m_created && !std::filesystem::exists(m_dir, ec);
  return fmt::format(" (--write: the partial output was removed: {} files {} '{}')", removed,
                     folder_gone ? "and the folder" : "from", m_dir.string());
}

}  // namespace numprobe::probes
