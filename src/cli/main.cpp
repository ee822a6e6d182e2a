// numprobe: numerics validation and accuracy debugging of ML kernels.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "src/cli/command.hpp"
#include "src/core/interrupt.hpp"
#include "src/providers/plugin_worker.hpp"

namespace numprobe::cli {
int& exit_status() {
  static int status = 0;
  return status;
}
}  // namespace numprobe::cli

int main(int argc, char** argv) {
  using namespace numprobe;
  // Hidden: numprobe re-executed as the worker process of a `plugin:PATH` backend
  // (plugin_worker.hpp). It keeps the default signal actions: numprobe kills its group.
  if (argc >= 2 && std::strcmp(argv[1], plugin::k_worker_subcommand) == 0)
    return plugin::worker_main(argc, argv);
  {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) plugin::set_worker_executable(std::string(self, static_cast<std::size_t>(n)));
  }
  // SIGINT/SIGTERM while a child runs: its group is killed, temporary folders removed, partial
  // reports written, exit 130/143 (src/core/interrupt.hpp).
  install_interrupt_handlers();
  const auto status = [](int code) { return interrupt_signal() ? 128 + interrupt_signal() : code; };
  CLI::App app{"numprobe: does this kernel compute what it should, at every length, in every "
               "format, on every accelerator?"};
  app.set_version_flag("--version", std::string(NUMPROBE_VERSION) + " (" NUMPROBE_GIT_REV ")");
  app.require_subcommand(1);
  cli::setup_backends(app);
  cli::setup_formats(app);
  cli::setup_quant(app);
  cli::setup_attention(app);
  cli::setup_drift(app);
  cli::setup_bisect(app);
  cli::setup_audit(app);
  cli::setup_kvcache(app);
  cli::setup_softmax(app);
  cli::setup_scan(app);
  cli::setup_convert(app);
  cli::setup_kl(app);
  cli::setup_run(app);
  cli::setup_merge(app);
  cli::setup_invariance(app);
  cli::setup_mma(app);
  cli::setup_burnin(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors are input errors: one line, exit 2.
    std::fprintf(stderr, "numprobe: error: %s\n", e.what());
    return 2;
  } catch (const numprobe::interrupted& e) {
    std::fprintf(stderr, "numprobe: %s\n", e.what());
    return 128 + e.signal_number();
  } catch (const numprobe::error& e) {
    std::fprintf(stderr, "numprobe: error: %s\n", e.what());
    return status(static_cast<int>(e.code()));
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "numprobe: error: out of memory (case too large for this machine)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numprobe: internal error: %s\n", e.what());
    return 3;
  }
  return status(cli::exit_status());
}
