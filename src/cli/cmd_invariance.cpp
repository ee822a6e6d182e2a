// `numprobe invariance`: does the same request get the same bits? (issue 30; docs/invariance.md)
#include <fmt/format.h>
#include <memory>
#include <sstream>
#include <algorithm>
#include <fmt/ranges.h>

#include "numprobe/base/error.hpp"
#include "probes/invariance/invariance_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"

namespace numprobe::cli {
namespace {

struct invariance_flags {
  case_flags cf;
  std::string checks;
  std::string require;
  std::int64_t repeats = 3;
  std::string batch_sizes = "1,2,3,8,33,64";
  std::string chunks;
  std::string lengths;
  bool ragged = false;
  bool no_ragged = false;
};

std::vector<std::int64_t> positive_list(const std::string& text, const std::string& flag) {
  std::vector<std::int64_t> out;
  for (const auto& item : split_list(text)) out.push_back(parse_positive(item, flag));
  if (out.empty() && !text.empty()) throw_input_error(flag, "expected a comma list of positive integers");
  return out;
}

std::vector<std::string> check_list(const std::string& text, const std::string& flag) {
  const auto& known = probes::invariance_check_names();
  std::vector<std::string> out = split_list(text);
  for (const auto& name : out)
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw_input_error(flag, fmt::format("unknown check '{}' (known: {})", name, fmt::join(known, ", ")));
  return out;
}

}  // namespace

void setup_invariance(CLI::App& app) {
  auto flags = std::make_shared<invariance_flags>();
  // CPU-sized defaults: every check runs the kernel dozens of times (batches up to 64).
  flags->cf.seq = "256";
  flags->cf.heads = 4;
  flags->cf.kv_heads = 2;
  flags->cf.head_dim = 64;
  auto* sub = app.add_subcommand("invariance", "same request, same bits? repeat, batch, decode, chunk, splits");
  add_case_flags(sub, flags->cf, "keys S");
  add_report_flags(sub, flags->cf.out);
  sub->add_option("--checks", flags->checks, "comma list of repeat,batch,decode,chunk,splits (default: all)");
  sub->add_option("--require", flags->require, "checks that must be invariant (exit 1 otherwise)");
  sub->add_option("--repeats", flags->repeats, "calls of the repeat check")->capture_default_str();
  sub->add_option("--batch-sizes", flags->batch_sizes, "batch sizes of the batch and splits checks")
      ->capture_default_str();
  sub->add_option("--chunk", flags->chunks, "chunk lengths C (default: 16 and the query tile + 1)");
  sub->add_option("--decode-lengths", flags->lengths, "key lengths S of the decode check (default: around the key tile)");
  sub->add_flag("--ragged", flags->ragged,
                "the exec/exec-worker kernel reads case.json's seq_lens: give it ragged batches too");
  sub->add_flag("--no-ragged", flags->no_ragged, "uniform batches only (no members of other lengths)");
  sub->callback([flags] {
    auto& f = *flags;
    probes::invariance_options o;
    o.base = make_case(f.cf, parse_positive(f.cf.seq, "--seq"));
    if (o.base.batch != 1) throw_input_error("--batch", "invariance composes its own batches: give one sequence");
    o.provider = make_provider_options(f.cf);
    o.checks = check_list(f.checks, "--checks");
    const std::vector<std::string> require = check_list(f.require, "--require");
    if (f.repeats < 1) throw_input_error("--repeats", "must be at least 1");
    o.repeats = f.repeats;
    o.batch_sizes = positive_list(f.batch_sizes, "--batch-sizes");
    o.chunks = positive_list(f.chunks, "--chunk");
    o.decode_lengths = positive_list(f.lengths, "--decode-lengths");
    o.bounds = gate_bounds(f.cf, o.provider);
    if (f.ragged && f.no_ragged) throw_input_error("--ragged", "contradicts --no-ragged");
    o.provider.ragged = f.ragged;
    o.ragged_batches = !f.no_ragged;
    const probes::invariance_result r = probes::run_invariance(o);
    result::check_result rc;
    probes::fill_result(r, require, rc);
    const int code = probes::invariance_exit_code(r, require);
    write_command_reports(f.cf.out, "invariance", o.base.seed, std::move(rc), code);
    exit_status() = code;
  });
}

}  // namespace numprobe::cli
