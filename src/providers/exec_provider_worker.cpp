#include "src/providers/exec_provider_worker.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "src/core/quoted_text.hpp"
#include "src/providers/exec_provider_process.hpp"

namespace numprobe::exec {

worker_process::worker_process(std::vector<std::string> argv, double timeout_s,
                               std::string log_path, std::string label)
    : m_argv(std::move(argv)),
      m_label(label.empty() ? fmt::format("exec worker '{}'", quote_words(m_argv)) : std::move(label)),
      m_timeout_s(timeout_s),
      m_log(std::move(log_path)),
      m_defer(std::make_unique<interrupt_scope>()) {}

worker_process::~worker_process() { stop(true); }

void worker_process::fail(const std::string& what) {
  const std::string tail = tail_lines(m_log, 6);
  stop(false);
  throw_if_interrupted();
  std::string text = tail.empty() ? what : fmt::format("{}; last stderr lines: {}", what, tail);
  if (m_protocol_stage && ++m_protocol_failures >= k_max_protocol_failures) {
    m_given_up = fmt::format("does not speak the worker protocol (READY {}, then OK, ERR or UNSUPPORTED per RUN): "
                             "given up after {} starts; the last: {}",
                             k_worker_protocol_version, m_protocol_failures, text);
    text = m_given_up;
  }
  m_protocol_stage = false;
  throw_backend_error(m_label, text);
}

void worker_process::start() {
  throw_if_interrupted();
  std::vector<char*> args;
  for (const auto& a : m_argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // A socket pair rather than pipes: send(MSG_NOSIGNAL) to a dead worker gives EPIPE instead
  // of a SIGPIPE that would kill numprobe.
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw_backend_error("exec worker", fmt::format("socketpair failed: {}", std::strerror(errno)));
  const int log_fd = ::open(m_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  int err_pipe[2];
  if (log_fd < 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    if (log_fd >= 0) ::close(log_fd);
    throw_backend_error(m_log, "cannot open the worker log");
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    ::close(log_fd);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    throw_backend_error("exec worker", fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(sv[1], 0);
    ::dup2(sv[1], 1);
    ::dup2(log_fd, 2);
    ::execvp(args[0], args.data());
    const int e = errno;
    [[maybe_unused]] auto n = ::write(err_pipe[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  register_child_group(pid);
  ::close(sv[1]);
  ::close(log_fd);
  ::close(err_pipe[1]);
  int e = 0;
  ssize_t got;
  do got = ::read(err_pipe[0], &e, sizeof(e)); while (got < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  m_pid = pid;
  m_fd = sv[0];
  m_buffer.clear();
  ++m_starts;
  if (got == static_cast<ssize_t>(sizeof(e)))
    fail(fmt::format("could not be started: {}", std::strerror(e)));
  m_protocol_stage = true;  // no READY, or another version: a protocol failure
  const std::string ready = read_line("READY");
  if (ready.rfind("READY", 0) != 0) fail(fmt::format("sent '{}' where READY was expected", ready));
  const std::string version = ready.size() > 6 ? ready.substr(6) : "";
  if (version != std::to_string(k_worker_protocol_version))
    fail(fmt::format("speaks protocol '{}', numprobe speaks {}", version, k_worker_protocol_version));
  m_protocol_stage = false;
}

std::string worker_process::read_line(const std::string& waiting_for) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(m_timeout_s));
  for (;;) {
    for (auto nl = m_buffer.find('\n'); nl != std::string::npos; nl = m_buffer.find('\n')) {
      std::string line = m_buffer.substr(0, nl);
      m_buffer.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      // Stray output on stdout is ignored; only protocol words count.
      if (line.rfind("READY", 0) == 0 || line == "OK" || line.rfind("OK ", 0) == 0 ||
          line.rfind("ERR", 0) == 0 || line.rfind("UNSUPPORTED", 0) == 0)
        return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      fail(fmt::format("gave no {} within {:g} s (--exec-timeout); killed with its process group",
                       waiting_for, m_timeout_s));
    if (const int sig = interrupt_signal()) {
      stop(false);  // the worker's whole group, at once
      throw interrupted(sig);
    }
    // Wakes on the worker's output or on a signal (the self-pipe), whichever comes first.
    const int revents = wait_readable(m_fd, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (revents == 0) continue;
    char buf[4096];
    const ssize_t got = ::read(m_fd, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      // End of file: the worker exited or closed stdout. Say how it ended.
      int status = 0;
      std::string how = "closed its stdout";
      for (int i = 0; i < 100; ++i) {
        if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
          how = WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                : WIFSIGNALED(status)
                    ? fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                                  ::strsignal(WTERMSIG(status)))
                    : how;
          ::kill(-m_pid, SIGKILL);  // whatever it started goes with it
          unregister_child_group(m_pid);
          m_pid = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      fail(fmt::format("{} while numprobe waited for {}", how, waiting_for));
    }
    m_buffer.append(buf, static_cast<std::size_t>(got));
  }
}

void worker_process::run_case(const std::string& dir, const std::string& who) {
  try {
    run(dir);
  } catch (const interrupted&) {
    throw;
  } catch (const unsupported_case& e) {
    throw unsupported_case(who, e.reason());
  } catch (const error& e) {
    throw error(exit_code::m_backend, who, e.what());
  }
}

void worker_process::run(const std::string& dir) {
  const std::string msg = request(dir);
  if (!msg.empty()) throw_backend_error(m_label, fmt::format("ERR {}", msg));
}

std::string worker_process::request(const std::string& dir) {
  if (!m_given_up.empty()) throw_backend_error(m_label, m_given_up);
  if (m_pid < 0) start();
  const std::string line = "RUN " + dir + "\n";
  std::size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(m_fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(fmt::format("cannot send RUN: {}", std::strerror(errno)));
    sent += static_cast<std::size_t>(n);
  }
  const std::string answer = read_line("OK, ERR or UNSUPPORTED");
  m_protocol_failures = 0;  // a protocol word: the worker speaks the protocol
  if (answer == "OK" || answer.rfind("OK ", 0) == 0) return {};
  // The kernel declares the case unsupported: a verdict, not a failure (the worker lives on).
  if (answer == "UNSUPPORTED" || answer.rfind("UNSUPPORTED ", 0) == 0) {
    const std::string reason = answer.size() > 12 ? sanitize_quoted(answer.substr(12)) : "";
    throw_unsupported(m_label, reason.empty() ? "(no reason given)" : reason);
  }
  if (answer.rfind("ERR", 0) == 0) {
    const std::string msg = answer.size() > 4 ? sanitize_quoted(answer.substr(4)) : "";
    return msg.empty() ? "(no message)" : msg;
  }
  m_protocol_stage = true;
  fail(fmt::format("answered '{}' to RUN", sanitize_quoted(answer)));
}

void worker_process::stop(bool graceful) noexcept {
  if (interrupt_signal()) graceful = false;  // interrupted: no grace period
  if (m_pid > 0) {
    if (graceful && m_fd >= 0) {
      static const char quit[] = "QUIT\n";
      [[maybe_unused]] auto n = ::send(m_fd, quit, sizeof(quit) - 1, MSG_NOSIGNAL);
      ::shutdown(m_fd, SHUT_WR);
      // A well-behaved worker exits at once; give it a moment before the kill.
      for (int i = 0; i < 200; ++i) {
        int status = 0;
        if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
          ::kill(-m_pid, SIGKILL);  // what it started and left behind
          unregister_child_group(m_pid);
          m_pid = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (m_pid > 0) {
      ::kill(-m_pid, SIGKILL);
      ::kill(m_pid, SIGKILL);
      int status = 0;
      while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {}
      unregister_child_group(m_pid);
      m_pid = -1;
    }
  }
  if (m_fd >= 0) {
    ::close(m_fd);
    m_fd = -1;
  }
}

}  // namespace numprobe::exec
