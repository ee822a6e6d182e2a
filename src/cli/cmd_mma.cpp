// `numprobe mma`: measure a device's tensor-core arithmetic, or run the same catalogue on a CPU
// model (--model), and say which hypothesis each property's outputs match (issue 31;
// docs/hardware.md).
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "probes/mma/mma_run.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::cli {
namespace {

struct mma_flags {
  int device = 0;
  std::string model;
  std::string json_path;
  std::string emit_vectors;
  bool list_models = false;
};

void print_table(const probes::mma_run_result& r) {
  fmt::print("numprobe mma: {}\n", r.source);
  for (const auto& c : r.paths) {
    fmt::print("\n{} (input {}, k {})\n", c.path.name, formats::name(c.path.input), c.path.k);
    fmt::print("  {:<18} {:>7}  {}\n", "property", "vectors", "finding");
    for (const auto& p : c.properties)
      fmt::print("  {:<18} {:>7}  {}\n", p.name, p.vectors.size(), p.verdict);
  }
  for (const auto& s : r.skipped) fmt::print("skipped: {}\n", s);
}

void list_models() {
  fmt::print("{:<18} {:<40} {:>4} {:>6} {:>5} {:>5}  {}\n", "name", "instruction", "k", "group", "F", "out",
             "rounding (sum, output)");
  for (const auto& m : emu::mma_models())
    fmt::print("{:<18} {:<40} {:>4} {:>6} {:>5} {:>5}  {}, {}\n", m.name, m.instruction, m.k, m.k_group,
               m.internal_fraction_bits, m.output_fraction_bits, emu::mma_rounding_name(m.internal_rounding),
               emu::mma_rounding_name(m.output_rounding));
}

}  // namespace

void setup_mma(CLI::App& app) {
  auto flags = std::make_shared<mma_flags>();
  auto* sub = app.add_subcommand("mma", "measure the device's tensor-core arithmetic (or a CPU model's)");
  sub->add_option("--device", flags->device, "CUDA device ordinal")->capture_default_str();
  sub->add_option("--model", flags->model, "run the catalogue on a named CPU model instead of the device");
  sub->add_option("--json", flags->json_path, "write the result with every vector's evidence (- for stdout)");
  sub->add_option("--emit-vectors", flags->emit_vectors,
                  "write the catalogue's vectors of the device paths as JSON (- for stdout) and exit");
  sub->add_flag("--list-models", flags->list_models, "list the named models and exit");
  sub->callback([flags] {
    const auto& f = *flags;
    if (f.device < 0) throw_input_error("--device", "must be 0 or more");
    if (f.list_models) {
      list_models();
      return;
    }
    if (!f.emit_vectors.empty()) {
      nlohmann::json doc = json_envelope("mma --emit-vectors", 0);
      doc["paths"] = probes::mma_vectors_json(probes::mma_device_paths())["paths"];
      write_json(f.emit_vectors, doc);
      return;
    }
    probes::mma_run_options o;
    o.device = f.device;
    if (!f.model.empty()) o.model = f.model;
    const probes::mma_run_result r = probes::run_mma(o);
    if (f.json_path != "-") print_table(r);
    if (!f.json_path.empty()) {
      nlohmann::json doc = json_envelope("mma", 0);  // no random inputs: every vector is designed
      doc.update(probes::mma_result_json(r));
      write_json(f.json_path, doc);
    }
  });
}

}  // namespace numprobe::cli
