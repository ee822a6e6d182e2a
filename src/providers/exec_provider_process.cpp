#include "src/providers/exec_provider_process.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "src/core/interrupt.hpp"
#include "src/core/quoted_text.hpp"

namespace numprobe::exec {

std::vector<std::string> split_command(const std::string& command, const std::string& place) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char ch = command[i];
    if (ch == ' ' || ch == '\t' || ch == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (ch == '\'') {
      const auto end = command.find('\'', i + 1);
      if (end == std::string::npos) throw_input_error(place, "unterminated ' in the command");
      word += command.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (ch == '"') {
      std::size_t j = i + 1;
      for (; j < command.size() && command[j] != '"'; ++j) {
        if (command[j] == '\\' && j + 1 < command.size() &&
            std::strchr("\"\\$`", command[j + 1]) != nullptr)
          ++j;
        word += command[j];
      }
      if (j >= command.size()) throw_input_error(place, "unterminated \" in the command");
      i = j;
      in_word = true;
    } else if (ch == '\\' && i + 1 < command.size()) {
      word += command[++i];
      in_word = true;
    } else {
      word += ch;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) throw_input_error(place, "the command is empty");
  return words;
}

void require_placeholders(const std::vector<std::string>& argv, const std::string& place) {
  for (const auto& w : argv)
    if (w.find("{in}") != std::string::npos || w.find("{out}") != std::string::npos ||
        w.find("{case}") != std::string::npos)
      return;
  throw_input_error(place, "the command names no {in}, {out} or {case}, so it cannot find its case; "
                           "a worker that reads cases from stdin is exec-worker:CMD");
}

std::vector<std::string> substitute(std::vector<std::string> words, const std::string& in,
                                    const std::string& out, const std::string& case_json) {
  auto replace_all = [](std::string& s, const std::string& from, const std::string& to) {
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
      s.replace(p, from.size(), to);
  };
  for (auto& w : words) {
    replace_all(w, "{in}", in);
    replace_all(w, "{out}", out);
    replace_all(w, "{case}", case_json);
  }
  return words;
}

process_result run_process(const std::vector<std::string>& argv, double timeout_s,
                           const std::string& log_path) {
  process_result r;
  throw_if_interrupted();
  // From before fork to after the wait, Ctrl-C and SIGTERM reach the loop below (which kills
  // the child's group) instead of ending numprobe with the child left running.
  const interrupt_scope defer;
  // Everything the child needs is prepared before fork: after fork only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0)
    throw_backend_error(log_path, fmt::format("cannot open the log: {}", std::strerror(errno)));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    throw_backend_error("exec", fmt::format("pipe failed: {}", std::strerror(errno)));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    if (null_fd >= 0) ::close(null_fd);
    throw_backend_error("exec", fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // own group: a timeout kills the command and everything it started
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execvp(args[0], args.data());
    const int e = errno;
    [[maybe_unused]] auto n = ::write(err_pipe[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  register_child_group(pid);
  ::close(err_pipe[1]);
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  int e = 0;
  ssize_t got;
  do got = ::read(err_pipe[0], &e, sizeof(e)); while (got < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof(e))) r.exec_errno = e;

  int status = 0;
  int interrupted_by = 0;
  auto sleep_ms = 1;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    interrupted_by = interrupt_signal();
    if (elapsed >= timeout_s || interrupted_by) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      r.timed_out = interrupted_by == 0;
      break;
    }
    // Sleeps on the self-pipe: a signal wakes the loop at once.
    (void)wait_readable(-1, sleep_ms);
    sleep_ms = std::min(sleep_ms * 2, 20);
  }
  // The case is over once the command exits: whatever it left running in its group (a
  // `sleep 300 &`, a server it forked) goes with it, as a worker's group does when it quits.
  // The group id is the command's pid, which stays reserved until the group is empty.
  ::kill(-pid, SIGKILL);
  unregister_child_group(pid);
  if (interrupted_by) throw interrupted(interrupted_by);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.timed_out) {
    if (WIFEXITED(status)) {
      r.exited = true;
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.signal = WTERMSIG(status);
    }
  }
  return r;
}

std::string tail_lines(const std::string& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(in.tellg());
  const std::streamoff keep = std::min<std::streamoff>(size, 16384);
  in.seekg(size - keep);
  std::string text(static_cast<std::size_t>(keep), '\0');
  in.read(text.data(), keep);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    // Quoted into one-line errors: no terminal control, valid UTF-8 (quoted_text.hpp).
    std::string line = sanitize_quoted(text.substr(start, end - start));
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
    start = end + 1;
  }
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return out;
}

std::string describe(const process_result& r, double timeout_s) {
  if (r.exec_errno) return fmt::format("could not be started: {}", std::strerror(r.exec_errno));
  if (r.timed_out)
    return fmt::format("timed out after {:g} s (--exec-timeout) and was killed with its process group",
                       timeout_s);
  if (r.signal)
    return fmt::format("was killed by signal {} ({})", r.signal, ::strsignal(r.signal));
  return fmt::format("exited with status {}", r.exit_code);
}

std::string quote_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    if (!w.empty() && w.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) {
      out += w;
    } else {
      out += '\'';
      for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

void run_case_command(const std::vector<std::string>& argv_in, const std::string& dir,
                      double timeout_s, const std::string& who) {
  const auto argv = substitute(argv_in, dir, dir, dir + "/case.json");
  const std::string log = dir + "/exec.log";
  const auto r = run_process(argv, timeout_s, log);
  if (r.exec_errno == 0 && !r.timed_out && r.exited && r.exit_code == 0) return;
  // 77: the kernel declares the case unsupported (automake's and ctest's "skipped"); its last
  // output line is the reason.
  if (r.exec_errno == 0 && !r.timed_out && r.exited && r.exit_code == k_unsupported_exit) {
    const std::string reason = tail_lines(log, 1);
    throw_unsupported(who, reason.empty() ? "the command exited with status 77 (unsupported)" : reason);
  }
  const std::string tail = tail_lines(log, 6);
  throw_backend_error(who, fmt::format("command '{}' {}{}", quote_words(argv), describe(r, timeout_s),
                                       tail.empty() ? "" : "; last output lines: " + tail));
}

std::string make_temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr)
    throw_backend_error(templ, fmt::format("cannot create a temporary directory: {}",
                                           std::strerror(errno)));
  return templ;
}

void remove_tree(const std::string& path) noexcept {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace numprobe::exec
