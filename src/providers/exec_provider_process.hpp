#pragma once
// Child processes for `--backend exec:CMD`: command splitting without a shell, a run with a time
// limit that kills the whole process group, and the tail of the captured output for errors.
#include <cstdint>
#include <string>
#include <vector>

namespace numprobe::exec {

// Splits a command line into words the way a POSIX shell splits plain words: blanks separate,
// '...' and "..." quote, backslash escapes. Nothing else is interpreted: no variables, globs,
// pipes or redirections (use `sh -c '...'` for those; that is the user's choice). Throws an
// input error naming `place` on an unterminated quote or an empty command.
[[nodiscard]] std::vector<std::string> split_command(const std::string& command,
                                                     const std::string& place);

// A one-shot command (exec:CMD) finds its case only through {in}, {out} or {case}: one that
// names none of them would fail every case after its time-out. An input error naming `place`
// up front (a worker, exec-worker:CMD, reads its cases from stdin and needs none).
void require_placeholders(const std::vector<std::string>& argv, const std::string& place);

// Replaces every {in}, {out} and {case} in each word.
[[nodiscard]] std::vector<std::string> substitute(std::vector<std::string> words,
                                                  const std::string& in, const std::string& out,
                                                  const std::string& case_json);

struct process_result {
  int exec_errno = 0;      // non-zero: the program could not be started (errno of execvp)
  bool timed_out = false;  // killed (with its process group) after the time limit
  bool exited = false;     // exited normally with exit_code
  int exit_code = 0;
  int signal = 0;          // terminated by this signal
  double seconds = 0.0;
};

// Runs argv[0] (searched in PATH) with stdin from /dev/null and stdout + stderr appended to
// `log_path`, in its own process group; after `timeout_s` seconds the group gets SIGKILL.
[[nodiscard]] process_result run_process(const std::vector<std::string>& argv, double timeout_s,
                                         const std::string& log_path);

// The last `n` non-empty lines of a text file, joined with " | " (one-line error messages).
[[nodiscard]] std::string tail_lines(const std::string& path, std::size_t n);

// A one-line description of how a process ended ("exited with status 2", "was killed by
// signal 11 (Segmentation fault)", "timed out after 1.5 s").
[[nodiscard]] std::string describe(const process_result& r, double timeout_s);

// Quotes words for messages (so a user can paste the command into a shell).
[[nodiscard]] std::string quote_words(const std::vector<std::string>& words);

// The exit status by which a one-shot command refuses a case it does not implement (automake's
// and ctest's "skipped"; examples/exec/README.md).
inline constexpr int k_unsupported_exit = 77;

// Runs one case's command (argv with {in}/{out} = dir and {case} = dir/case.json substituted),
// output to dir/exec.log. Throws unsupported_case when it exits 77 (its last output line is the
// reason), and a backend error (exit 3) prefixed with `who` when the command cannot start, exits
// non-zero otherwise, is killed or times out, quoting its last output lines.
void run_case_command(const std::vector<std::string>& argv, const std::string& dir,
                      double timeout_s, const std::string& who);

// A fresh private directory under $TMPDIR (or /tmp) named prefix-XXXXXX.
[[nodiscard]] std::string make_temp_dir(const std::string& prefix);
void remove_tree(const std::string& path) noexcept;

}  // namespace numprobe::exec
