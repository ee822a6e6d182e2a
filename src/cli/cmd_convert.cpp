// `numprobe convert RELEASE --to SCHEME [--format F] [--write OUT]`: re-quantize a released
// checkpoint for other hardware and report the error it adds (probes/release/convert_probe.hpp).
#include <fmt/format.h>

#include <memory>

#include "numprobe/core/bound.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/release.hpp"
#include "probes/release/convert_probe.hpp"
#include "src/cli/command.hpp"
#include "src/cli/quant_conventions.hpp"
#include "src/cli/report_output.hpp"

namespace numprobe::cli {
namespace {

struct convert_flags {
  std::string release, to, format, write, write_layout, against, layout, filter;
  double shard_gib = 4.0;
  bool allow_nonfinite = false;
  std::vector<std::string> bounds;
  report_flags out;
  convention_flags conventions;
};

}  // namespace

void setup_convert(CLI::App& app) {
  auto f = std::make_shared<convert_flags>();
  auto* sub = app.add_subcommand(
      "convert", "re-quantize a released quantized checkpoint (NVFP4, MXFP4, fp8, int4 layouts) for other hardware");
  sub->add_option("release", f->release, "the release: .safetensors, index .json, a folder with config.json, or a GGUF file")
      ->required();
  sub->add_option("--to", f->to, "target scheme (numprobe formats lists them), e.g. mxfp4, fp8-block128; or dequant: every tensor's "
                  "decoded values as F32 (with --write)")->required();
  sub->add_option("--format", f->format, "target element format (default: the scheme's), e.g. e4m3fnuz");
  auto* write_opt =
      sub->add_option("--write", f->write, "write the converted checkpoint (sharded .safetensors + index) to this new folder");
  sub->add_option("--write-layout", f->write_layout,
                  "layout to write: modelopt-nvfp4, ct-mxfp4, deepseek-fp8, ct-fp8 (default: the target's) or bf16");
  sub->add_option("--shard-gib", f->shard_gib, "shard size of --write in GiB")->capture_default_str();
  sub->add_option("--against", f->against, "the original bf16/f16/f32 checkpoint: errors against it too");
  sub->add_option("--layout", f->layout, "the release's layout, overriding detection");
  sub->add_option("--filter", f->filter, "regex on tensor names");
  sub->add_option("--bound", f->bounds, "gate, e.g. added_sqnr_db>=20 (repeatable; exit 1 on breach)");
  sub->add_flag("--allow-nonfinite", f->allow_nonfinite,
                "exit 0 even when the release decodes to NaN/Inf (reported; their added error is NaN; --write "
                "refuses such a release either way)");
  add_report_flags(sub, f->out);
  add_convention_flags(sub, f->conventions);
  sub->callback([f, write_opt] {
    // --write names a new folder: "" would silently write nothing, and '-' is not stdout here.
    if (write_opt->count() > 0 && f->write.empty()) throw_input_error("--write", "needs a folder name, got ''");
    if (f->write == "-") throw_input_error("--write", "'-' is not a folder (a checkpoint cannot go to stdout)");
    probes::convert_options o;
    o.release = f->release;
    o.against = f->against;
    o.filter = f->filter;
    o.allow_nonfinite = f->allow_nonfinite;
    if (!f->layout.empty()) o.layout = io::parse_release_layout(f->layout, "--layout");
    if (f->to == "dequant") {
      // Every tensor's decoded values, as F32: no scheme, so no scheme's flags.
      if (!f->format.empty()) throw_input_error("--format", "not with --to dequant (it writes F32 values)");
      if (!f->write_layout.empty()) throw_input_error("--write-layout", "not with --to dequant (it writes F32 values)");
      o.dequant = true;
      o.target_name = "dequant";
    } else {
      const auto& s = formats::find_scheme(f->to, "--to");
      o.target_name = std::string(s.name);
      o.target = s.defaults;
      if (!f->format.empty()) o.target.element = formats::parse_format(f->format, "--format");
      apply_convention_flags(f->conventions, o.target);
      formats::validate(o.target, 1, 1);
    }
    o.write = f->write;
    o.write_layout = f->write_layout;
    if (!(f->shard_gib > 0) || f->shard_gib > 1024)
      throw_input_error("--shard-gib", fmt::format("must be in (0, 1024], got {}", f->shard_gib));
    o.shard_bytes = static_cast<std::uint64_t>(f->shard_gib * static_cast<double>(std::uint64_t{1} << 30));
    for (const auto& b : f->bounds) o.bounds.push_back(parse_bound(b));
    const auto r = probes::run_convert(o);
    // NaN/Inf in the release is a finding, as in scan RELEASE (the gate nonfinite<=0).
    exit_status() = r.breaches.empty() && (r.nonfinite == 0 || o.allow_nonfinite) ? 0 : 1;
    result::check_result c;
    probes::fill_result(r, c);
    write_command_reports(f->out, "convert", 0, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
