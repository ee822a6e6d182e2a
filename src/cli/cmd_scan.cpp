// `numprobe scan CKPT`: per-tensor quantization report over a checkpoint (.safetensors or an
// index .json), ranked worst first, grouped by layer type and depth, with bits per parameter
// and total bytes per format. `--from e4m3fn --to e4m3fnuz` instead reports what an MI300
// migration of an FP8 checkpoint changes.
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <sstream>

#include "numprobe/core/error.hpp"
#include "probes/scan_fnuz.hpp"
#include "probes/scan_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"
#include "src/cli/progress.hpp"
#include "src/cli/table.hpp"

namespace numprobe::cli {
namespace {

struct scan_flags {
  std::string checkpoint, format = "nvfp4", vs, filter, from, to;
  report_flags out;  // --json, --csv, --md, --html, --junit
  bool all = false;
  std::size_t top = 20;
  bool allow_nonfinite = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.2f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

void print_report(const probes::scan_report& r, std::size_t top) {
  const auto& schemes = r.options.schemes;
  fmt::print("checkpoint {}: {} tensors scanned ({}), {} skipped\n\n", r.options.checkpoint,
             r.tensors.size(), human_bytes(r.source_bytes), r.skipped.size());
  fmt::print("worst tensors under {} (of {})\n", schemes[0], r.tensors.size());
  text_table t({"rank", "tensor", "shape", "sqnr_db", "rel_rms", "max_abs", "flushed", "clipped",
                "outlier_blk", "vs"});
  for (std::size_t i = 0; i < r.tensors.size() && i < top; ++i) {
    const auto& x = r.tensors[i];
    const auto& p = x.results[0];
    std::string vs;
    for (std::size_t s = 1; s < x.results.size(); ++s)
      vs += fmt::format("{}{} {:.2f} dB", s > 1 ? ", " : "", x.results[s].scheme,
                        x.results[s].sqnr_db);
    t.add({std::to_string(i + 1), x.name, fmt::format("{}x{}", x.rows, x.cols), fixed3(p.sqnr_db),
           sci(p.rel_rms), sci(p.max_abs), std::to_string(p.flushed), std::to_string(p.clipped),
           std::to_string(p.outlier_blocks), vs.empty() ? "-" : vs});
  }
  t.print();
  if (!r.tensors.empty() && !r.tensors[0].results[0].worst.flat.empty()) {
    const auto& x = r.tensors[0];
    const auto& w = x.results[0].worst;
    const auto& b = w.stats;
    fmt::print("\nworst block of {} ({}): rows {}..{}, cols {}..{}, amax {} at ({},{}), scale {}, "
               "{} flushed, {} clipped\n",
               x.name, w.outlier ? "outlier block" : "largest error", b.row0, b.row0 + b.rows - 1,
               b.col0, b.col0 + b.cols - 1, sci(b.amax), b.argmax / x.cols, b.argmax % x.cols,
               fmt::format("{:.9g}", b.scale), b.flushed, b.clipped);
    text_table e({"element", "input", "dequant", "note"});
    for (std::size_t i = 0; i < w.flat.size() && i < 16; ++i) {
      std::string note = w.flat[i] == b.argmax ? "sets the scale" : "";
      if (w.input[i] != 0 && w.dequant[i] == 0) note = "FLUSHED";
      e.add({fmt::format("({},{})", w.flat[i] / x.cols, w.flat[i] % x.cols),
             fmt::format("{:.6g}", w.input[i]), fmt::format("{:.6g}", w.dequant[i]), note});
    }
    e.print();
  }
  fmt::print("\nby layer type ({})\n", schemes[0]);
  text_table g({"type", "tensors", "params", "sqnr_db", "flushed", "clipped", "worst tensor"});
  for (const auto& x : r.by_type[0])
    g.add({x.key, std::to_string(x.tensors), std::to_string(x.elements), fixed3(x.sqnr_db),
           std::to_string(x.flushed), std::to_string(x.clipped), x.worst_tensor});
  g.print();
  if (r.by_depth[0].size() > 1) {
    fmt::print("\nby depth ({})\n", schemes[0]);
    text_table d({"layer", "tensors", "params", "sqnr_db", "flushed", "outlier_blk"});
    for (const auto& x : r.by_depth[0])
      d.add({x.key, std::to_string(x.tensors), std::to_string(x.elements), fixed3(x.sqnr_db),
             std::to_string(x.flushed), std::to_string(x.outlier_blocks)});
    d.print();
  }
  fmt::print("\nper format\n");
  text_table f({"format", "sqnr_db", "bits/param", "bytes", "flushed", "clipped"});
  for (const auto& x : r.totals)
    f.add({x.key, fixed3(x.sqnr_db),
           fmt::format("{:.4f}", x.elements ? x.bytes * 8.0 / static_cast<double>(x.elements) : 0.0),
           human_bytes(x.bytes), std::to_string(x.flushed), std::to_string(x.clipped)});
  f.print();
  fmt::print("time {:.2f} s ({:.0f} MB/s)\n", r.seconds, r.bytes_read / 1e6 / std::max(r.seconds, 1e-9));
}

void print_fnuz(const probes::fnuz_report& r, std::size_t top) {
  fmt::print("e4m3fn -> e4m3fnuz migration of {}: {} fp8 tensors\n\n", r.checkpoint,
             r.tensors.size());
  text_table t({"tensor", "elements", "clip@same scale", "0x80 rewrites", "NaN codes", "amax",
                "scale x", "scale tensor"});
  const auto row = [&](const probes::fnuz_tensor_report& x) {
    t.add({x.name, std::to_string(x.elements), std::to_string(x.clip_same_scale),
           std::to_string(x.neg_zero_rewrites), std::to_string(x.nan_codes), fmt::format("{:g}", x.amax),
           fmt::format("{:.4g}", x.scale_factor_no_clip), x.scale_tensor.empty() ? "-" : x.scale_tensor});
  };
  for (std::size_t i = 0; i < r.tensors.size() && i < top; ++i) row(r.tensors[i]);
  row(r.total);
  t.print();
  fmt::print("\nreuse the bits: rewrite {} bytes 0x80 -> 0x00 and double every scale (exact; {} "
             "fn NaN codes would read as +-480).\nre-encode at the same scale: {} values in "
             "(240, 448] clip; multiplying the scale by {:.4g} (or 2, exactly) avoids it.\n",
             r.total.neg_zero_rewrites, r.total.nan_codes, r.total.clip_same_scale,
             r.total.scale_factor_no_clip);
}

}  // namespace

void setup_scan(CLI::App& app) {
  auto f = std::make_shared<scan_flags>();
  auto* sub = app.add_subcommand(
      "scan", "per-tensor quantization report over a checkpoint, ranked worst first");
  sub->add_option("checkpoint", f->checkpoint, ".safetensors file, sharded index .json, or one .npy tensor")->required();
  sub->add_option("--format", f->format, "primary format/scheme (numprobe formats lists them)")
      ->capture_default_str();
  sub->add_option("--vs", f->vs, "comma-separated schemes to compare, e.g. mxfp4,fp8-block128");
  sub->add_option("--filter", f->filter, "regex on tensor names");
  sub->add_flag("--all", f->all, "include non-matrix tensors (norms, biases)");
  sub->add_option("--top", f->top, "tensors shown in the table")->capture_default_str();
  add_report_flags(sub, f->out, "write CSV (one row per tensor and format) to PATH");
  sub->add_option("--from", f->from, "fp8 migration: source format (e4m3fn)");
  sub->add_option("--to", f->to, "fp8 migration: target format (e4m3fnuz)");
  sub->add_flag("--allow-nonfinite", f->allow_nonfinite,
                "exit 0 even when input tensors hold NaN/Inf (they are still reported)");
  sub->callback([f] {
    if (!f->from.empty() || !f->to.empty()) {
      if (f->from != "e4m3fn" || f->to != "e4m3fnuz")
        throw_input_error("--from/--to", "supported migration: --from e4m3fn --to e4m3fnuz (got '" +
                                             f->from + "' -> '" + f->to + "')");
      const auto r = probes::run_fnuz_migration(f->checkpoint, f->filter);
      if (!f->out.to_stdout()) print_fnuz(r, f->top);
      exit_status() = 0;
      result::check_result c;
      c.backend = "ref";
      c.case_id = fmt::format("scan({},e4m3fn->e4m3fnuz)", f->checkpoint);
      c.details = probes::to_json(r);
      write_command_reports(f->out, "scan", 0, std::move(c), 0);
      return;
    }
    probes::scan_options o;
    o.checkpoint = f->checkpoint;
    o.schemes = {f->format};
    for (const auto& s : split_list(f->vs)) o.schemes.push_back(s);
    o.filter = f->filter;
    o.all = f->all;
    progress_bar bar;
    o.progress = [&bar](std::size_t done, std::size_t total, const std::string& name) {
      bar.update(done, total, name);
    };
    const auto r = probes::run_scan(o);
    bar.finish();
    if (!f->out.to_stdout()) print_report(r, f->top);
    // NaN/Inf in a checkpoint is a finding: it is excluded from the error sums, so without
    // this line a poisoned tensor would read as a good SQNR.
    std::int64_t nonfinite_tensors = 0, nonfinite = 0;
    for (const auto& t : r.tensors)
      if (!t.results.empty() && t.results[0].nonfinite_inputs > 0) {
        ++nonfinite_tensors;
        nonfinite += t.results[0].nonfinite_inputs;
        if (!f->out.to_stdout())
          std::fprintf(stderr, "numprobe: NON-FINITE input: %s holds %lld NaN/Inf elements (excluded from the error metrics)\n",
                       t.name.c_str(), static_cast<long long>(t.results[0].nonfinite_inputs));
      }
    if (nonfinite_tensors > 0 && !f->out.to_stdout())
      fmt::print("NON-FINITE: {} tensor(s) hold {} NaN/Inf input elements{}\n", nonfinite_tensors, nonfinite,
                 f->allow_nonfinite ? " (allowed by --allow-nonfinite)" : "; exit 1 (--allow-nonfinite accepts them)");
    exit_status() = nonfinite_tensors > 0 && !f->allow_nonfinite ? 1 : 0;
    result::check_result c;
    probes::fill_result(r, o, {}, f->allow_nonfinite, c);
    write_command_reports(f->out, "scan", 0, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
