// `numprobe scan CKPT`: per-tensor quantization report over a checkpoint (.safetensors or an
// index .json), ranked worst first (--rank-by), grouped by layer type and depth, with bits per parameter
// and total bytes per format. `--from e4m3fn --to e4m3fnuz` instead reports what an MI300
// migration of an FP8 checkpoint changes.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <sstream>

#include "numprobe/base/error.hpp"
#include "numprobe/core/bound.hpp"
#include "probes/release/release_probe.hpp"
#include "probes/scan/scan_fnuz.hpp"
#include "probes/scan/scan_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/quant_conventions.hpp"
#include "src/cli/report_output.hpp"
#include "src/cli/mpi_session.hpp"
#include "src/cli/progress.hpp"
#include "src/cli/shard_merge.hpp"
#include "src/scenario/run_scenario.hpp"

namespace numprobe::cli {
namespace {

struct scan_flags {
  std::string checkpoint, format = "nvfp4", vs, filter, from, to, rank_by = "bulk", act_stats;
  std::string shard;  // --shard i/N (probes/scan/scan_probe.hpp, scan_shard_of)
  std::string against, layout;  // a released quantized checkpoint (probes/release/release_probe.hpp)
  std::vector<std::string> bounds;
  report_flags out;  // --json, --csv, --md, --html, --junit
  bool all = false;
  std::size_t top = 20;
  bool allow_nonfinite = false;
  bool mpi = false;  // --mpi: the ranks are the shards, rank 0 writes the merged report
  convention_flags conventions;  // --preset, --scale-division, --scale-floor, --scale-arith, --rule
};

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
  sub->add_option("--rank-by", f->rank_by,
                  "what ranks the tensors, worst first: sqnr, flushed (flushed %), outlier (outlier-flushed %), "
                  "bulk (error below the p90 of |x|), output (expected output error: weighted by --act-stats, "
                  "else isotropic activations, which is sqnr's order)")
      ->capture_default_str();
  sub->add_option("--act-stats", f->act_stats,
                  ".safetensors of each input channel's E[x_j^2] per weight W (key W, or W with .weight replaced by "
                  ".input_sq_mean; examples/act_stats/): adds out_err and out_sqnr_db, and --rank-by output uses them");
  add_report_flags(sub, f->out, "write CSV (one row per tensor and format) to PATH");
  add_convention_flags(sub, f->conventions);
  sub->add_option("--against", f->against,
                  "CKPT is a quantized release: its error against this original bf16/f16/f32 checkpoint, and the "
                  "conventions its codes match (tensors[].against)");
  sub->add_option("--layout", f->layout,
                  "CKPT is a quantized release in this layout (modelopt-nvfp4, ct-nvfp4, ct-mxfp4, ct-fp8, "
                  "modelopt-fp8, ct-int4, gptoss-mxfp4, deepseek-fp8, awq, gptq-v1, gptq-v2), overriding detection");
  sub->add_option("--bound", f->bounds,
                  "release gate on the worst tensor, e.g. sqnr_db>=20 or identify_unmatched<=0 (repeatable)");
  sub->add_option("--from", f->from, "fp8 migration: source format (e4m3fn)");
  sub->add_option("--to", f->to, "fp8 migration: target format (e4m3fnuz)");
  sub->add_option("--shard", f->shard,
                  "scan share i of N (0 <= i < N) of the tensors, split by bytes; `numprobe merge` joins the N "
                  "JSON documents into the unsharded report");
  sub->add_flag("--mpi", f->mpi,
                "under mpirun: rank r of n scans shard r/n, rank 0 writes the unsharded report (needs an MPI build)");
  sub->add_flag("--allow-nonfinite", f->allow_nonfinite,
                "exit 0 even when input tensors hold NaN/Inf (they are still reported)");
  sub->callback([f, sub] {
    const bool release = !f->against.empty() || !f->layout.empty() || probes::looks_like_release(f->checkpoint);
    if (!f->shard.empty() && (release || !f->from.empty() || !f->to.empty()))
      throw_input_error("--shard", "applies to a tensor scan; not to a quantized release or --from/--to");
    if (f->mpi && (release || !f->from.empty() || !f->to.empty()))
      throw_input_error("--mpi", "applies to a tensor scan; not to a quantized release or --from/--to");
    if (f->mpi && !f->shard.empty()) throw_input_error("--mpi", "the ranks are the shards: give --mpi or --shard");
    std::optional<mpi_session> mpi;
    if (f->mpi) mpi.emplace();
    if (release) {
      // A release is read as it is stored: the flags of a tensor scan do not apply to it, and
      // taking them silently would let a user believe they did.
      for (const char* name : {"--format", "--vs", "--top", "--rank-by", "--act-stats", "--all", "--from", "--to",
                               "--preset", "--scale-division", "--scale-floor", "--scale-arith", "--rule"})
        if (const auto* opt = sub->get_option_no_throw(name); opt && opt->count() > 0)
          throw_input_error(name, "applies to a tensor scan; '" + f->checkpoint +
                                      "' is a quantized release, read as stored (scan --against ORIGINAL, --bound)");
      probes::release_scan_options o;
      o.allow_nonfinite = f->allow_nonfinite;
      o.release = f->checkpoint;
      o.against = f->against;
      o.filter = f->filter;
      if (!f->layout.empty()) o.layout = io::parse_release_layout(f->layout, "--layout");
      for (const auto& b : f->bounds) o.bounds.push_back(parse_bound(b));
      const auto r = probes::run_release_scan(o);
      exit_status() = r.breaches.empty() && (r.nonfinite == 0 || o.allow_nonfinite) ? 0 : 1;
      result::check_result c;
      probes::fill_result(r, c);
      write_command_reports(f->out, "scan", 0, std::move(c), exit_status());
      return;
    }
    if (!f->bounds.empty()) throw_input_error("--bound", "scan takes bounds for a quantized release only");
    if (!f->from.empty() || !f->to.empty()) {
      if (f->from != "e4m3fn" || f->to != "e4m3fnuz")
        throw_input_error("--from/--to", "supported migration: --from e4m3fn --to e4m3fnuz (got '" +
                                             f->from + "' -> '" + f->to + "')");
      const auto r = probes::run_fnuz_migration(f->checkpoint, f->filter);
      exit_status() = 0;
      result::check_result c;
      probes::fill_result(r, f->top, c);
      write_command_reports(f->out, "scan", 0, std::move(c), 0);
      return;
    }
    probes::scan_options o;
    o.rank_by = probes::parse_scan_rank(f->rank_by, "--rank-by");
    o.checkpoint = f->checkpoint;
    o.schemes = {f->format};
    for (const auto& s : split_list(f->vs)) o.schemes.push_back(s);
    // A convention flag that no scanned scheme takes is refused by name, not dropped (the
    // adjustment below applies each flag to the schemes it names only).
    const auto scans_kind = [&o](formats::scheme_kind k) {
      for (std::string name : o.schemes) {
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        for (const auto& s : formats::all_schemes())
          if (s.name == name && s.defaults.kind == k) return true;
      }
      return false;
    };
    if (!f->conventions.rule.empty() && !scans_kind(formats::scheme_kind::m_mx))
      throw_input_error("--rule", "an MX scale rule; none of --format/--vs is an MX scheme (mx, mxfp4, mxfp6, mxfp8, mxint8)");
    for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--scale-division", &f->conventions.division},
                                      {"--scale-floor", &f->conventions.floor},
                                      {"--scale-arith", &f->conventions.arith}})
      if (!value->empty() && !scans_kind(formats::scheme_kind::m_nvfp4))
        throw_input_error(flag, "applies to nvfp4 only; none of --format/--vs is nvfp4");
    if (!f->shard.empty()) {
      const auto sh = scenario::parse_shard(f->shard);
      o.shard_index = sh.index;
      o.shard_count = sh.count;
    }
    if (mpi && mpi->size() > 1) {
      o.shard_index = mpi->rank();
      o.shard_count = mpi->size();
    }
    o.filter = f->filter;
    o.all = f->all;
    o.top = f->top;
    o.act_stats = f->act_stats;
    // The conventions apply to the schemes they name: the NVFP4 axes to nvfp4, --rule to the
    // MX schemes, a preset to both (`--vs` may mix them).
    o.adjust_scheme = [conv = f->conventions](formats::scheme_config& c) {
      convention_flags g = conv;
      if (c.kind != formats::scheme_kind::m_nvfp4) g.division = g.floor = g.arith = "";
      if (c.kind != formats::scheme_kind::m_mx) g.rule = "";
      apply_convention_flags(g, c);
    };
    progress_bar bar;
    o.progress = [&bar](std::size_t done, std::size_t total, const std::string& name) {
      bar.update(done, total, name);
    };
    if (mpi && mpi->size() > 1) {  // each rank its shard; rank 0 merges them as `numprobe merge` does
      const auto docs = mpi->run_and_gather([&] {
        const auto r = probes::run_scan(o);
        result::check_result c;
        probes::fill_result(r, o, {}, f->allow_nonfinite, c);
        result::normalise_non_finite(c.details);  // as a file would hold it: inf and NaN as strings
        c.details["command_document"] = true;      // and named as a scan document is
        c.details["command"] = "scan";
        return c.details.dump();
      });
      exit_status() = mpi->finish([&] {
        std::vector<nlohmann::json> parsed;
        std::vector<std::string> places;
        for (std::size_t k = 0; k < docs.size(); ++k) {
          parsed.push_back(nlohmann::json::parse(docs[k]));
          places.push_back(fmt::format("rank {}", k));
        }
        auto m = merge_scan_documents(parsed, places);
        const int code = m.exit_code;
        write_command_reports(f->out, "scan", 0, std::move(m.check), code);
        return code;
      });
      return;
    }
    const auto r = probes::run_scan(o);
    bar.finish();
    // NaN/Inf in a checkpoint is a finding: it is excluded from the error sums, so without
    // this line a poisoned tensor would read as a good SQNR.
    std::int64_t nonfinite_tensors = 0;
    for (const auto& t : r.tensors)
      if (!t.results.empty() && t.results[0].nonfinite_inputs > 0) {
        ++nonfinite_tensors;
        if (!f->out.to_stdout())
          std::fprintf(stderr, "numprobe: NON-FINITE input: %s holds %lld NaN/Inf elements (excluded from the error metrics)\n",
                       t.name.c_str(), static_cast<long long>(t.results[0].nonfinite_inputs));
      }
    exit_status() = nonfinite_tensors > 0 && !f->allow_nonfinite ? 1 : 0;
    result::check_result c;
    probes::fill_result(r, o, {}, f->allow_nonfinite, c);
    write_command_reports(f->out, "scan", 0, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
