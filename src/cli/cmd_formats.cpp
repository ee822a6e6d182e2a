#include "src/cli/command.hpp"
#include "numprobe/core/error.hpp"

namespace numprobe::cli {
void setup_formats(CLI::App& app) {
  auto* sub = app.add_subcommand("formats", "(not built yet)");
  sub->callback([] { throw_backend_error("formats", "not implemented yet"); });
}
}  // namespace numprobe::cli
