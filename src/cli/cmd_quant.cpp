#include "src/cli/command.hpp"
#include "numprobe/core/error.hpp"

namespace numprobe::cli {
void setup_quant(CLI::App& app) {
  auto* sub = app.add_subcommand("quant", "(not built yet)");
  sub->callback([] { throw_backend_error("quant", "not implemented yet"); });
}
}  // namespace numprobe::cli
