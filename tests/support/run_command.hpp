#pragma once
// Runs the built numprobe binary for CLI tests and captures stdout, stderr and the exit code.
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace numprobe::testing {

struct command_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string numprobe_binary() { return std::string(NUMPROBE_BINARY_DIR) + "/numprobe"; }

// `args` is appended to the binary path as shell words (tests pass fixed, quoted strings).
inline command_result run_numprobe(const std::string& args) {
  const std::string err_path = "/tmp/numprobe_test_stderr_" + std::to_string(::getpid()) + "_" +
                               std::to_string(reinterpret_cast<std::uintptr_t>(&args));
  const std::string cmd = numprobe_binary() + " " + args + " 2>" + err_path;
  command_result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
}

}  // namespace numprobe::testing
