#include "src/cli/command.hpp"
#include "numprobe/core/error.hpp"

namespace numprobe::cli {
void setup_attention(CLI::App& app) {
  auto* sub = app.add_subcommand("attention", "(not built yet)");
  sub->callback([] { throw_backend_error("attention", "not implemented yet"); });
}
}  // namespace numprobe::cli
