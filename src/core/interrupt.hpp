#pragma once
// Ctrl-C and SIGTERM while numprobe waits on a child process (exec, exec-worker, plugin
// worker) or runs a scenario. The signal handler only records the signal and writes one byte
// to a self-pipe; the waiting loops poll that pipe, kill their child's process group, remove
// their temporary folders (as the `interrupted` error unwinds) and the CLI exits 128 + signal
// (130 for SIGINT, 143 for SIGTERM) after writing whatever partial reports it has.
//
// Outside an interrupt_scope nobody polls, so a signal keeps its default action (the process
// ends at once, as before). A second signal while the first is pending also ends the process at
// once, after a SIGKILL to every registered child process group.
#include <atomic>
#include <sys/types.h>

#include "numprobe/base/error.hpp"

namespace numprobe {

// The error that unwinds an interrupted command. Its exit code is 128 + the signal number.
class interrupted : public error {
 public:
  explicit interrupted(int signal_number);
  [[nodiscard]] int signal_number() const noexcept { return m_signal; }

 private:
  int m_signal;
};

// Installs the SIGINT and SIGTERM handlers (numprobe's main, once).
void install_interrupt_handlers();

// True once a signal was caught (the scenario runner's interrupt_requested()).
[[nodiscard]] std::atomic<bool>& interrupt_flag() noexcept;
// The signal caught (SIGINT or SIGTERM), or 0 when none is pending.
[[nodiscard]] int interrupt_signal() noexcept;
// Read end of the self-pipe (readable after a signal), for poll(); -1 without handlers.
[[nodiscard]] int interrupt_fd() noexcept;
// Throws `interrupted` when a signal is pending.
void throw_if_interrupted();
// Waits up to `timeout_ms` for `fd` to become readable (fd < 0: just sleeps), waking early on a
// signal. Returns poll()'s revents for fd (0 on timeout or signal).
int wait_readable(int fd, int timeout_ms);

// While one is alive, SIGINT/SIGTERM are deferred to the flag above instead of ending numprobe.
class interrupt_scope {
 public:
  interrupt_scope() noexcept;
  ~interrupt_scope();
  interrupt_scope(const interrupt_scope&) = delete;
  interrupt_scope& operator=(const interrupt_scope&) = delete;
};

// Child process groups killed (SIGKILL) by a signal that ends numprobe at once.
void register_child_group(pid_t pgid) noexcept;
void unregister_child_group(pid_t pgid) noexcept;

}  // namespace numprobe
