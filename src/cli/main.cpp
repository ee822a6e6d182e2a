// numprobe: numerics validation and accuracy debugging of ML kernels.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

#include "numprobe/core/error.hpp"
#include "src/cli/command.hpp"

namespace numprobe::cli {
int& exit_status() {
  static int status = 0;
  return status;
}
}  // namespace numprobe::cli

int main(int argc, char** argv) {
  using namespace numprobe;
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
  cli::setup_kvcache(app);
  cli::setup_softmax(app);
  cli::setup_scan(app);
  cli::setup_kl(app);
  cli::setup_run(app);
  cli::setup_merge(app);
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
  } catch (const numprobe::error& e) {
    std::fprintf(stderr, "numprobe: error: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "numprobe: error: out of memory (case too large for this machine)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numprobe: internal error: %s\n", e.what());
    return 3;
  }
  return cli::exit_status();
}
