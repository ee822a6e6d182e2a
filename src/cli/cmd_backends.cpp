#include "src/cli/command.hpp"
#include "numprobe/core/error.hpp"

namespace numprobe::cli {
void setup_backends(CLI::App& app) {
  auto* sub = app.add_subcommand("backends", "(not built yet)");
  sub->callback([] { throw_backend_error("backends", "not implemented yet"); });
}
}  // namespace numprobe::cli
