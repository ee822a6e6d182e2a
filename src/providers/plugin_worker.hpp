#pragma once
// `--backend plugin:PATH` runs the plugin in a child worker process that numprobe owns, so a
// plugin that crashes, aborts, calls exit() or never returns costs one case (exit 3 naming
// the case and the plugin), not the run. `plugin-inproc:PATH` calls it in numprobe's own
// process (faster, no isolation).
//
// The worker is numprobe itself: `numprobe __plugin-worker PATH DEVICE CALL_FILE` (the
// executable from set_worker_executable, or $NUMPROBE_PLUGIN_WORKER for programs that link the
// library). It speaks the exec worker line protocol (exec_provider_worker.hpp) over a socket
// pair, so it has the same time limit (--exec-timeout per answer), process group and stderr
// log (in a session folder under $TMPDIR). For each `RUN` both processes map the call file
// (MAP_SHARED; a memfd the worker opens as /proc/PID/fd/N, else session/call.bin): a header
// (operation, buffer table, answers), the ABI params with data pointers written as offsets
// into the file, then the buffers. The worker owns its CUDA context for device-memory
// plugins (the staging of plugin_library.cpp runs there).
#include <memory>
#include <string>

#include "src/providers/plugin_library.hpp"

namespace numprobe::exec {
class worker_process;
}

namespace numprobe::plugin {

inline constexpr const char* k_worker_subcommand = "__plugin-worker";

// numprobe's main registers its own executable (/proc/self/exe).
void set_worker_executable(std::string path);
// $NUMPROBE_PLUGIN_WORKER, else the registered executable; throws a backend error placed at
// `place` when neither is there (a program that links the library and is not numprobe).
[[nodiscard]] std::string worker_executable(const std::string& place);

// The worker's main: argv = {exe, "__plugin-worker", PATH, DEVICE, CALL_FILE}; returns the
// exit status.
int worker_main(int argc, char** argv);

class worker_client {
 public:
  worker_client(std::string plugin_path, int device, double timeout_s);
  ~worker_client();
  worker_client(const worker_client&) = delete;
  worker_client& operator=(const worker_client&) = delete;

  // Loads the plugin in the worker; its refusals come back with their in-process text.
  [[nodiscard]] capabilities load();
  // One call in the worker; `who` (plugin, function, case) prefixes every failure.
  [[nodiscard]] call_result invoke(call& c, const std::string& who);
  [[nodiscard]] int starts() const;

 private:
  void request(const std::string& who);

  std::string m_plugin;
  std::string m_session;
  int m_fd = -1;  // the call file
  std::unique_ptr<exec::worker_process> m_worker;
};

}  // namespace numprobe::plugin
