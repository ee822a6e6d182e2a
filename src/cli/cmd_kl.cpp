#include "numprobe/core/error.hpp"
#include "src/cli/command.hpp"

namespace numprobe::cli {
void setup_kl(CLI::App& app) {
  auto* sub = app.add_subcommand("kl", "(not built yet)");
  sub->callback([] { throw_backend_error("kl", "not implemented yet"); });
}
}  // namespace numprobe::cli
