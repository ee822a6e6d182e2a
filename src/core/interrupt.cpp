#include "src/core/interrupt.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

namespace numprobe {
namespace {

std::atomic<bool> g_flag{false};
std::atomic<int> g_signal{0};
std::atomic<int> g_depth{0};
int g_pipe[2] = {-1, -1};

// A fixed table: the handler may read it (lock-free atomics only, no allocation).
constexpr int k_groups = 16;
std::atomic<pid_t> g_groups[k_groups];

extern "C" void on_interrupt(int sig) {
  const int saved = errno;
  if (g_depth.load() == 0 || g_flag.load()) {
    // Nobody polls (or this is the second signal): end now, taking the children along.
    for (auto& g : g_groups)
      if (const pid_t p = g.load(); p > 0) ::kill(-p, SIGKILL);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    errno = saved;
    return;
  }
  g_signal.store(sig);
  g_flag.store(true);
  if (g_pipe[1] >= 0) [[maybe_unused]] auto n = ::write(g_pipe[1], "x", 1);
  errno = saved;
}

void drain_pipe() noexcept {
  char buf[64];
  while (g_pipe[0] >= 0 && ::read(g_pipe[0], buf, sizeof(buf)) > 0) {}
}

}  // namespace

interrupted::interrupted(int signal_number)
    : error(static_cast<exit_code>(128 + signal_number), "",
            fmt::format("interrupted by {} (child processes killed, temporary folders removed)",
                        signal_number == SIGTERM ? "SIGTERM" : signal_number == SIGINT ? "SIGINT"
                                                                                       : ::strsignal(signal_number))),
      m_signal(signal_number) {}

void install_interrupt_handlers() {
  if (g_pipe[0] < 0 && ::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_pipe[0] = g_pipe[1] = -1;
  struct sigaction sa {};
  sa.sa_handler = &on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the loops that care poll the pipe; other calls just continue
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

std::atomic<bool>& interrupt_flag() noexcept { return g_flag; }

int interrupt_signal() noexcept { return g_flag.load() ? g_signal.load() : 0; }

int interrupt_fd() noexcept { return g_pipe[0]; }

void throw_if_interrupted() {
  if (const int s = interrupt_signal()) throw interrupted(s);
}

int wait_readable(int fd, int timeout_ms) {
  pollfd p[2] = {{fd, POLLIN, 0}, {g_pipe[0], POLLIN, 0}};
  const int n = ::poll(p, 2, timeout_ms);
  if (n <= 0) return 0;
  // A byte left from a signal the flag no longer records (a reset between runs) is stale.
  if ((p[1].revents & POLLIN) && !g_flag.load()) drain_pipe();
  return fd >= 0 ? p[0].revents : 0;
}

interrupt_scope::interrupt_scope() noexcept { g_depth.fetch_add(1); }
interrupt_scope::~interrupt_scope() { g_depth.fetch_sub(1); }

void register_child_group(pid_t pgid) noexcept {
  for (auto& g : g_groups) {
    pid_t empty = 0;
    if (g.compare_exchange_strong(empty, pgid)) return;
  }
}

void unregister_child_group(pid_t pgid) noexcept {
  for (auto& g : g_groups) {
    pid_t mine = pgid;
    if (g.compare_exchange_strong(mine, 0)) return;
  }
}

}  // namespace numprobe
