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
#include "src/cli/report_output.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::cli {
namespace {

struct mma_flags {
  int device = 0;
  std::string model;
  report_flags out;
  std::string emit_vectors;
  bool list_models = false;
};

// The command's one check: a findings table (one row per path and property; --csv writes it)
// and the probe's JSON with every vector's evidence as the document's top level.
result::check_result mma_check(const probes::mma_run_result& r) {
  result::check_result c;
  c.backend = r.source.rfind("model ", 0) == 0 ? "emu" : "cuda";
  c.message = r.source;
  result::table t{"mma findings", {"path", "property", "vectors", "finding"}, {}, false};
  for (const auto& p : r.paths)
    for (const auto& prop : p.properties)
      t.rows.push_back({p.path.name, prop.name, std::to_string(prop.vectors.size()), prop.verdict});
  result::view_builder v(c);
  v.line(r.source);
  v.add_table(t);
  for (const auto& s : r.skipped) v.line("skipped: " + s);
  v.line("evidence (vectors, measured outputs, every hypothesis' predictions): --json; method: docs/hardware.md");
  c.tables.push_back(t);
  c.tables.back().data = true;  // --csv: one row per path and property
  c.details = probes::mma_result_json(r);
  return c;
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
  add_report_flags(sub, flags->out, "write the findings table (path, property, vectors, finding) as CSV");
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
    write_command_reports(f.out, "mma", 0, mma_check(r), 0);
  });
}

}  // namespace numprobe::cli
