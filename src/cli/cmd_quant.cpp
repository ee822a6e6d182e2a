// `numprobe quant`: quantize one tensor with a format and a block-scaling scheme; report error,
// flushes, clipping, scale underflow and outlier blocks, with a worked block.
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "probes/quant/quant_identify.hpp"
#include "probes/quant/quant_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/quant_conventions.hpp"
#include "src/cli/report_output.hpp"

namespace numprobe::cli {
namespace {

struct quant_flags {
  std::string format;  // empty: the scheme's element format
  std::string scheme = "nvfp4";
  std::string input;
  std::string shape;
  std::string dist = "llm";
  int axis = -1;
  std::int64_t group = 0;
  std::string scale_format;
  convention_flags conventions;  // --preset, --scale-division, --scale-floor, --scale-arith, --rule
  std::string rounding = "rne";
  std::string overflow = "saturate";
  std::uint64_t seed = 7;
  report_flags out;  // --json, --csv, --md, --html, --junit
  std::string dump;
  std::string identify;  // DIR with another implementation's codes.npy (and scales.npy)
  std::vector<std::string> bounds;
  std::string backend = "ref";
  std::size_t worst = 5;
  double exec_timeout = 60.0;
  bool keep = false;
  bool allow_nonfinite = false;
  bool axis_given = false, group_given = false;
  std::int64_t gemm = 0;           // --gemm TOKENS
  std::string acc_model;           // --acc-model NAME
  std::int64_t acc_promote = 0;    // --acc-promote N (instructions)
  bool acc_fma = false;            // --acc-fma: the promotion as one fma
};

probes::quant_probe_options make_options(const quant_flags& f) {
  const bool exec = f.backend.rfind("exec:", 0) == 0;
  if (f.backend != "ref" && f.backend != "cuda" && f.backend != "hip" && !exec) {
    if (f.backend.rfind("exec-worker", 0) == 0)
      throw_input_error("--backend", "quant runs one tensor: use exec:'CMD' (no worker mode)");
    if (f.backend == "emu")
      throw_backend_error("--backend", "quant has no '" + f.backend + "' backend in this build");
    throw_input_error("--backend", "unknown backend '" + f.backend + "' (known: ref, cuda, hip, exec:CMD)");
  }
  if (exec && !(f.exec_timeout > 0)) throw_input_error("--exec-timeout", "must be a positive number of seconds");
  probes::quant_probe_options o;
  o.backend = f.backend;  // cuda|hip|exec: the kernel is checked bit for bit (quant_device.cpp)
  o.exec_timeout_s = f.exec_timeout;
  o.keep_temp = f.keep;
  const auto& s = formats::find_scheme(f.scheme, "--scheme");
  o.scheme_name = std::string(s.name);
  o.config = s.defaults;
  if (!f.format.empty()) o.config.element = formats::parse_format(f.format, "--format");
  if (!f.scale_format.empty())
    o.config.scale_format = formats::parse_format(f.scale_format, "--scale-format");
  // Given values are checked, never replaced by the defaults: -1 or 0 used to fall back silently.
  if (f.axis_given) {
    if (f.axis != 0 && f.axis != 1) throw_input_error("--axis", fmt::format("expected 0 (rows) or 1 (cols), got {}", f.axis));
    o.config.axis = f.axis;
  }
  if (f.group_given) {
    if (f.group <= 0) throw_input_error("--group", fmt::format("must be a positive group size, got {}", f.group));
    // Only the group schemes take a size; NVFP4 and MX fix theirs (NUMERICS.md), and the others
    // have no groups: refused by name, never recorded in the case id and ignored.
    const auto k = o.config.kind;
    if (k != formats::scheme_kind::m_group && k != formats::scheme_kind::m_asym)
      throw_input_error("--group",
                        fmt::format("applies to the group schemes (group, int4-sym, int4-g128, int4-awq); {}",
                                    k == formats::scheme_kind::m_nvfp4 ? "nvfp4 blocks are 16 elements by definition"
                                    : k == formats::scheme_kind::m_mx  ? "MX blocks are 32 elements by definition"
                                                                       : o.scheme_name + " has no groups"));
    o.config.group = f.group;
  }
  apply_convention_flags(f.conventions, o.config);
  if (f.rounding == "rne") o.config.round = formats::rounding::m_nearest_even;
  else if (f.rounding == "rtz") o.config.round = formats::rounding::m_toward_zero;
  else if (f.rounding == "stochastic") o.config.round = formats::rounding::m_stochastic;
  else throw_input_error("--rounding", "expected rne, rtz or stochastic, got '" + f.rounding + "'");
  if (f.overflow == "saturate") o.config.over = formats::overflow::m_saturate;
  else if (f.overflow == "nan") o.config.over = formats::overflow::m_nan;
  else if (f.overflow == "inf") o.config.over = formats::overflow::m_inf;
  else throw_input_error("--overflow", "expected saturate, nan or inf, got '" + f.overflow + "'");
  o.config.seed = f.seed;
  o.seed = f.seed;
  o.input = f.input;
  o.dist = probes::parse_quant_dist(f.dist);
  if (!f.shape.empty()) {
    const auto sh = probes::parse_shape(f.shape);
    o.rows = sh.rows;
    o.cols = sh.cols;
  } else if (f.input.empty()) {
    o.rows = 1024;
    o.cols = 4096;
  }
  for (const auto& b : f.bounds) o.bounds.push_back(parse_bound(b));
  o.worst_count = f.worst;
  o.gemm.tokens = f.gemm;
  o.gemm.acc_model = f.acc_model;
  o.gemm.promote = f.acc_promote;
  o.gemm.acc_fma = f.acc_fma;
  if (f.gemm < 0) throw_input_error("--gemm", fmt::format("TOKENS must be 1..4096, got {}", f.gemm));
  if (f.gemm > 0 && f.backend != "ref")
    throw_input_error("--gemm", "the dequant GEMM runs on the CPU models: use it with --backend ref");
  // Config errors (formats, group, axis) surface before any input is generated or read.
  formats::validate(o.config, 1, 1);
  return o;
}

}  // namespace

void setup_quant(CLI::App& app) {
  auto f = std::make_shared<quant_flags>();
  auto* sub = app.add_subcommand(
      "quant", "quantize one tensor: error, flushes, clipping, outlier blocks, worked block");
  sub->add_option("--format", f->format, "element format (default: the scheme's)");
  sub->add_option("--scheme", f->scheme, "block-scaling scheme (numprobe formats lists them)")
      ->capture_default_str();
  sub->add_option("--input", f->input, "PATH[:TENSOR] of a .npy or .safetensors tensor");
  sub->add_option("--shape", f->shape, "MxN (synthetic; with --input: a reshape); default 1024x4096");
  sub->add_option("--dist", f->dist, "normal | laplace | llm | outliers | ties (rounding midpoints, scales across the e4m3 subnormal boundary, amax at the rule edges)")->capture_default_str();
  auto* axis_opt = sub->add_option("--axis", f->axis, "axis blocks run along: 0 rows, 1 cols (default 1)");
  auto* group_opt = sub->add_option("--group", f->group, "group size G for group schemes");
  sub->add_flag("--allow-nonfinite", f->allow_nonfinite,
                "exit 0 even when the input holds NaN/Inf (they are still reported)");
  sub->add_option("--scale-format", f->scale_format, "f32 | f16 | bf16 | e4m3fn | e8m0");
  add_convention_flags(sub, f->conventions);
  sub->add_option("--rounding", f->rounding, "rne | rtz | stochastic")->capture_default_str();
  sub->add_option("--overflow", f->overflow, "saturate | nan | inf")->capture_default_str();
  sub->add_option("--seed", f->seed, "input and stochastic-rounding seed")->check(seed_validator())->capture_default_str();
  add_report_flags(sub, f->out);
  sub->add_option("--dump", f->dump, "write codes.npy, scales.npy, dequant.npy into DIR");
  sub->add_option("--identify", f->identify,
                  "DIR with another implementation's codes.npy (and scales.npy) for the same input: which "
                  "conventions reproduce them (exit 1 when none does)");
  sub->add_option("--bound", f->bounds, "gate, e.g. sqnr_db>=20 or outlier_blocks<=0 (repeatable)");
  sub->add_option("--backend", f->backend,
                  "implementation under test: ref | cuda | hip | exec:'CMD {in}' (examples/exec)")
      ->capture_default_str();
  sub->add_option("--exec-timeout", f->exec_timeout, "exec backend: seconds per run")->capture_default_str();
  sub->add_flag("--keep", f->keep, "exec backend: keep the case directory");
  sub->add_option("--worst", f->worst, "how many worst blocks to list")->capture_default_str();
  sub->add_option("--gemm", f->gemm,
                  "TOKENS: the tensor as W of a dequant GEMM with TOKENS synthetic activation rows quantized "
                  "the same way, through --acc-model (docs/hardware.md)");
  sub->add_option("--acc-model", f->acc_model, "--gemm: the MMA model the products run through (numprobe mma --list-models)");
  sub->add_option("--acc-promote", f->acc_promote,
                  "--gemm: promote the MMA partial sum to fp32 every N instructions (and at every scale block end)");
  sub->add_flag("--acc-fma", f->acc_fma,
                "--gemm: the promotion as one fused multiply-add, as Triton compiles it by default (docs/hardware.md)");
  sub->callback([f, axis_opt, group_opt] {
    f->axis_given = axis_opt->count() > 0;
    f->group_given = group_opt->count() > 0;
    const auto o = make_options(*f);
    const auto r = probes::run_quant(o);
    if (!f->dump.empty()) probes::write_quant_dump(r, f->dump);
    // NaN/Inf inputs fail by default: they are excluded from the error metrics, so the other
    // gates cannot see them.
    const bool nonfinite = r.metrics.nan_inputs + r.metrics.inf_inputs > 0;
    if (nonfinite && !f->allow_nonfinite)
      std::fprintf(stderr, "numprobe: NON-FINITE input: %lld NaN and %lld Inf elements in %s\n",
                   static_cast<long long>(r.metrics.nan_inputs), static_cast<long long>(r.metrics.inf_inputs),
                   f->input.empty() ? "the input" : f->input.c_str());
    exit_status() = !r.breaches.empty() || (nonfinite && !f->allow_nonfinite) ? 1 : 0;
    result::check_result c;
    probes::fill_result(r, o.bounds, f->allow_nonfinite, c);
    if (!f->identify.empty()) {
      const auto id = probes::run_identify(r, f->identify);
      probes::add_identify(id, c);
      if (id.match < 0) exit_status() = 1;  // no combination reproduces the other codes: a finding
    }
    c.backend = f->backend;
    c.details["backend"] = {{"name", f->backend}};
    c.details["bounds"] = nlohmann::json::array();
    for (const auto& b : o.bounds) c.details["bounds"].push_back(b.text());
    c.details["pass"] = exit_status() == 0;
    write_command_reports(f->out, "quant", o.seed, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
