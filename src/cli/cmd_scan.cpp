#include "numprobe/core/error.hpp"
#include "src/cli/command.hpp"

namespace numprobe::cli {
void setup_scan(CLI::App& app) {
  auto* sub = app.add_subcommand("scan", "(not built yet)");
  sub->callback([] { throw_backend_error("scan", "not implemented yet"); });
}
}  // namespace numprobe::cli
