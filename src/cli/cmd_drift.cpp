#include "src/cli/command.hpp"
#include "numprobe/core/error.hpp"

namespace numprobe::cli {
void setup_drift(CLI::App& app) {
  auto* sub = app.add_subcommand("drift", "(not built yet)");
  sub->callback([] { throw_backend_error("drift", "not implemented yet"); });
}
}  // namespace numprobe::cli
