#include "numprobe/core/error.hpp"
#include "src/cli/command.hpp"

namespace numprobe::cli {
void setup_softmax(CLI::App& app) {
  auto* sub = app.add_subcommand("softmax", "(not built yet)");
  sub->callback([] { throw_backend_error("softmax", "not implemented yet"); });
}
}  // namespace numprobe::cli
