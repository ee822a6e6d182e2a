#pragma once
// Shared helpers of the bring-your-own-kernel tests: Python availability, paths, temp dirs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace numprobe::testing {

inline std::string python() { return NUMPROBE_TEST_PYTHON; }

// numpy is all the exec tests need (scripts/setup.sh --test installs it into the test venv);
// without it they skip cleanly, except under CI=true, where a missing install step must fail.
inline bool have_numpy() {
  static const bool ok = [] {
    if (python().empty()) return false;
    const std::string cmd = "'" + python() + "' -c 'import numpy' >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }();
  const char* ci = std::getenv("CI");
  EXPECT_TRUE(ok || ci == nullptr || std::string(ci) != "true")
      << "CI=true: '" << python() << "' lacks numpy";
  return ok;
}

inline std::string source_path(const std::string& rel) {
  return std::string(NUMPROBE_SOURCE_DIR) + "/" + rel;
}

// A fresh empty directory for one test.
inline std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("numprobe_byok_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline std::size_t count_entries(const std::string& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace numprobe::testing
