// `numprobe mma`: measure a device's tensor-core arithmetic, or run the same catalogue on a CPU
// model (--model), and say which hypothesis each property's outputs match (issue 31;
// docs/hardware.md).
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/io/regular_file.hpp"
#include "probes/mma/mma_promotion.hpp"
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
  bool promotion = false;  // --promotion: long dot products under --model, per promotion interval
  std::string promotion_lengths, promote_every, distributions;
  int samples = 16;
  std::uint64_t seed = 1;
  int agree = 0;
  std::string run_vectors;
};

std::vector<std::int64_t> int_list(const std::string& text, const char* flag, std::int64_t min) {
  std::vector<std::int64_t> out;
  for (const auto& t : split_list(text)) {
    std::int64_t v = 0;
    try {
      std::size_t used = 0;
      v = std::stoll(t, &used);
      if (used != t.size()) throw std::invalid_argument(t);
    } catch (const std::exception&) {
      throw_input_error(flag, fmt::format("'{}' is not an integer", t));
    }
    if (v < min) throw_input_error(flag, fmt::format("{} is below {}", v, min));
    out.push_back(v);
  }
  if (out.empty()) throw_input_error(flag, "needs at least one value");
  return out;
}

// `mma --model NAME --promotion`: relative error of long dot products against the exact sum,
// per length and promotion interval (one row each; --csv writes the table at full precision).
result::check_result promotion_check(const probes::mma_promotion_result& r, const probes::mma_promotion_options& o) {
  result::check_result c;
  c.backend = "emu";
  c.message = fmt::format("model {}: dot products chained over its instructions, promoted to fp32 every N "
                          "instructions (0: never); {} samples each", r.model, o.samples);
  result::table t{"promotion interval", {"inputs", "K", "promote every", "max rel error", "median rel error",
                                         "mean signed rel error"}, {}, false};
  result::table d{"promotion interval (data)", t.columns, {}, true};
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : r.points) {
    const std::string every = p.promote_every == 0 ? "never" : std::to_string(p.promote_every);
    t.rows.push_back({p.distribution, std::to_string(p.length), every, result::sci(p.max_rel), result::sci(p.median_rel),
                      result::sci(p.mean_signed_rel)});
    d.rows.push_back({p.distribution, std::to_string(p.length), std::to_string(p.promote_every),
                      fmt::format("{:.17g}", p.max_rel), fmt::format("{:.17g}", p.median_rel),
                      fmt::format("{:.17g}", p.mean_signed_rel)});
    points.push_back({{"distribution", p.distribution}, {"length", p.length}, {"promote_every", p.promote_every},
                      {"samples", p.samples}, {"max_rel", p.max_rel}, {"median_rel", p.median_rel},
                      {"mean_signed_rel", p.mean_signed_rel}});
  }
  result::view_builder v(c);
  v.line(c.message);
  v.add_table(t);
  v.line("method: docs/hardware.md, \"Promotion interval\"");
  c.tables.push_back(d);
  c.details = {{"model", r.model}, {"samples", o.samples}, {"seed", o.seed}, {"promotion", points}};
  return c;
}

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
  if (!r.agreement.empty() || !r.no_model.empty()) {
    result::table a{"model agreement (random and adversarial dot products, bit for bit)",
                    {"path", "model", "equal", "vectors", "model parameters"}, {}, false};
    for (const auto& x : r.agreement)
      a.rows.push_back({x.path, x.model, std::to_string(x.equal), std::to_string(x.vectors), x.model_text});
    v.add_table(a);
    for (const auto& n : r.no_model) v.line("no measured model: " + n);
  }
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
  sub->add_option("--agree", flags->agree,
                  "N random and adversarial dot products per path through the device (or --model) and the measured "
                  "and published models, bit for bit (exit 1 when the measured model disagrees)");
  sub->add_option("--run-vectors", flags->run_vectors,
                  "run your own vectors (a file in --emit-vectors' layout) through the device path of their format "
                  "and k (or --model) and write them with the outputs (--json)");
  sub->add_flag("--promotion", flags->promotion,
                "with --model: relative error of long dot products per promotion interval (docs/hardware.md)");
  sub->add_option("--promotion-lengths", flags->promotion_lengths,
                  "dot-product lengths K (default 4096,8192,16384,32768,65536,131072)");
  sub->add_option("--promote-every", flags->promote_every,
                  "promotion intervals in MMA instructions, 0 = never (default 1,4,16,64,0)");
  sub->add_option("--inputs", flags->distributions, "positive and/or normal (default both)");
  sub->add_option("--samples", flags->samples, "dot products per point")->capture_default_str();
  sub->add_option("--seed", flags->seed, "input seed")->capture_default_str();
  sub->callback([flags, sub] {
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
    if (f.promotion) {
      if (f.model.empty()) throw_input_error("--promotion", "needs --model NAME (the accumulator to chain)");
      probes::mma_promotion_options po;
      if (!f.promotion_lengths.empty()) po.lengths = int_list(f.promotion_lengths, "--promotion-lengths", 1);
      if (!f.promote_every.empty()) po.promote_every = int_list(f.promote_every, "--promote-every", 0);
      if (!f.distributions.empty()) po.distributions = split_list(f.distributions);
      po.samples = f.samples;
      po.seed = f.seed;
      const auto r = probes::run_mma_promotion(emu::find_mma_model(f.model, "--model"), po);
      write_command_reports(f.out, "mma", f.seed, promotion_check(r, po), 0);
      return;
    }
    for (const char* name : {"--promotion-lengths", "--promote-every", "--inputs", "--samples"})
      if (const auto* opt = sub->get_option_no_throw(name); opt && opt->count() > 0)
        throw_input_error(name, "applies to --promotion");
    probes::mma_run_options o;
    o.device = f.device;
    if (!f.model.empty()) o.model = f.model;
    if (!f.run_vectors.empty()) {
      nlohmann::json doc = json_envelope("mma --run-vectors", 0);
      const auto in = nlohmann::json::parse(io::read_text_file(f.run_vectors, std::size_t{1} << 30, "vectors file"),
                                            nullptr, false);
      if (in.is_discarded()) throw_input_error(f.run_vectors, "not JSON");
      doc["paths"] = probes::run_mma_vectors(in, o, f.run_vectors)["paths"];
      const auto json_path = f.out.paths.find("json");
      write_json(json_path == f.out.paths.end() ? "-" : json_path->second, doc);
      return;
    }
    o.agree = f.agree;
    o.seed = f.seed;
    const probes::mma_run_result r = probes::run_mma(o);
    const int code = r.measured_models_agree() ? 0 : 1;
    exit_status() = code;
    write_command_reports(f.out, "mma", f.seed, mma_check(r), code);
  });
}

}  // namespace numprobe::cli
