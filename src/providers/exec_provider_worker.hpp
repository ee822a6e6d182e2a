#pragma once
// The exec worker protocol (`--backend exec-worker:CMD`, or `exec:CMD --exec-worker`): one
// process serves a whole sweep, so Python and framework start-up is paid once.
//
// Lines are UTF-8 and end in '\n'. The worker's stdin and stdout carry only the protocol; it
// writes anything else to stderr (captured into a log whose last lines appear in errors).
//
//   worker -> numprobe   READY 1            once, after start-up (1 = protocol version)
//   numprobe -> worker   RUN <dir>          <dir> (the rest of the line) holds case.json,
//                                           q.npy, k.npy, v.npy; the worker writes o.npy
//                                           and optionally lse.npy into it
//   worker -> numprobe   OK                 done
//                        ERR <message>      this case failed; the worker stays up
//   numprobe -> worker   QUIT               end of the sweep; the worker exits with 0
//
// Worker lines that start with none of READY, OK, ERR are ignored. READY and each answer
// must come within the time limit; a worker that times out or dies is killed with its process
// group, the case fails, and the next case starts a fresh worker.
#include <memory>
#include <string>
#include <vector>

#include "src/core/interrupt.hpp"

namespace numprobe::exec {

inline constexpr int k_worker_protocol_version = 1;

class worker_process {
 public:
  // `label` names the worker in messages (default: exec worker 'CMD').
  worker_process(std::vector<std::string> argv, double timeout_s, std::string log_path,
                 std::string label = {});
  ~worker_process();
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  // Sends RUN <dir> (starting the worker first if needed) and waits for the answer. Throws a
  // backend error naming the command, with the last lines of its stderr.
  void run(const std::string& dir);
  // Sends RUN <dir> and returns "" for OK or the ERR message (sanitized, one line); throws like
  // run() when the worker dies, times out or answers something else. On SIGINT/SIGTERM the
  // worker's group is killed and `interrupted` is thrown.
  std::string request(const std::string& dir);
  // run(dir), its failure re-thrown as a backend error (exit 3) placed at `who` (the case).
  void run_case(const std::string& dir, const std::string& who);
  // How many times a worker process was started (1 for a healthy sweep).
  [[nodiscard]] int starts() const { return m_starts; }

 private:
  void start();
  void stop(bool graceful) noexcept;
  // The next protocol line, or throws after the deadline / on end of file.
  std::string read_line(const std::string& waiting_for);
  [[noreturn]] void fail(const std::string& what);

  std::vector<std::string> m_argv;
  std::string m_label;
  double m_timeout_s;
  std::string m_log;
  int m_pid = -1;
  int m_fd = -1;  // our end of the socket pair: the worker's stdin and stdout
  std::string m_buffer;
  int m_starts = 0;
  // Protocol failures in a row (no READY, another protocol version, an answer that is no
  // protocol word): a command that does not speak the protocol is not started again for every
  // case. After k_max_protocol_failures the worker is given up, and every later case fails at
  // once with the reason (exit 3), instead of waiting out --exec-timeout case after case.
  static constexpr int k_max_protocol_failures = 3;
  int m_protocol_failures = 0;
  bool m_protocol_stage = false;  // set while a failure would be a protocol failure
  std::string m_given_up;
  // While a worker may be alive, a signal is deferred to the poll loop (so the worker's group
  // is killed and the session folder removed) instead of ending numprobe.
  std::unique_ptr<interrupt_scope> m_defer;
};

}  // namespace numprobe::exec
