#pragma once
// Real-tool checks of report files, shared by the report and CLI tests: JUnit through xmllint
// (against junit.xsd) and python3's xml.etree; HTML through headless Chromium.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "support/run_command.hpp"

namespace numprobe::testing {

inline bool have_tool(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

inline std::string shell_output(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (rc) *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

inline std::string chromium_binary() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"})
    if (have_tool(c)) return c;
  return "";
}

// DOM after load and scripts, or empty with rc != 0.
inline std::string chromium_dom(const std::string& html_path, int* rc, std::string* log) {
  const std::string log_path = html_path + ".chromium.log";
  const auto dom = shell_output("timeout 120 " + chromium_binary() +
                                    " --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 "
                                    "--virtual-time-budget=5000 --dump-dom 'file://" + html_path + "' 2>'" + log_path + "'",
                                rc);
  std::ifstream in(log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  *log = ss.str();
  std::remove(log_path.c_str());
  return dom;
}

}  // namespace numprobe::testing
