// `numprobe burnin`: the same seeded work on every device, compared bit for bit across devices
// and repetitions, with each device's throughput (issue 32 B; probes/burnin/burnin_probe.hpp).
// Exit 1 when a device is an outlier.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "numprobe/io/regular_file.hpp"
#include "probes/burnin/burnin_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"
#include "src/providers/cuda_provider.hpp"
#include "src/providers/hip_provider.hpp"
#include "src/providers/knobs.hpp"

namespace numprobe::cli {
namespace {

struct burnin_flags {
  std::string backend = "emu";
  std::string devices = "all";
  std::int64_t reps = 0;
  double duration = 0.0;
  double mad_k = 5.0, mad_floor = 0.05;
  std::vector<std::string> faults;
  std::string record, against, scheme = "nvfp4";
  std::int64_t seq = 128, decode_seq = 512;
  std::uint64_t seed = 7;
  report_flags out;
};

// all | N | LIST: `all` is every visible device (one on emu: the host); N the first N; a list
// names ordinals.
std::vector<int> parse_devices(const std::string& text, const std::string& backend) {
  if (text == "all") {
    if (backend == "emu") return {0};
    const auto n = backend == "cuda" ? cuda_devices().size() : hip_devices().size();
    if (n == 0) throw_backend_error("--devices", fmt::format("no {} device visible", backend));
    std::vector<int> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = static_cast<int>(i);
    return all;
  }
  std::vector<int> out;
  const auto items = split_list(text);
  if (items.size() == 1 && text.find(',') == std::string::npos) {
    const auto n = parse_positive(items[0], "--devices");
    if (n > 1024) throw_input_error("--devices", fmt::format("{} devices: at most 1024", n));
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (const auto& item : items) {
    std::int64_t v = -1;
    try {
      std::size_t used = 0;
      v = std::stoll(item, &used);
      if (used != item.size()) v = -1;
    } catch (const std::exception&) {
      v = -1;
    }
    if (v < 0 || v > 1023) throw_input_error("--devices", fmt::format("'{}' is not a device ordinal (0..1023)", item));
    if (std::find(out.begin(), out.end(), static_cast<int>(v)) != out.end())
      throw_input_error("--devices", fmt::format("device {} given twice", v));
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw_input_error("--devices", "expected all, N or a comma list of ordinals");
  return out;
}

}  // namespace

void setup_burnin(CLI::App& app) {
  auto f = std::make_shared<burnin_flags>();
  auto* sub = app.add_subcommand("burnin", "the same seeded work on every device, compared bit for bit");
  sub->add_option("--backend", f->backend, "emu (emulated devices), cuda or hip")->capture_default_str();
  sub->add_option("--devices", f->devices, "all | N (the first N; on emu, N emulated devices) | a list, e.g. 0,2,3")
      ->capture_default_str();
  sub->add_option("--reps", f->reps, "repetitions of the work on every device");
  sub->add_option("--duration", f->duration, "repeat for S seconds (at least 2 repetitions)");
  sub->add_option("--mad-k", f->mad_k, "a device more than k MADs from the median relative speed is an outlier")
      ->capture_default_str();
  sub->add_option("--mad-floor", f->mad_floor, "the MAD is at least this fraction of the median speed")
      ->capture_default_str();
  sub->add_option("--fault", f->faults, "test hook (--backend emu): DEV:bitflip, DEV:flaky or DEV:slow (repeatable)");
  sub->add_option("--record", f->record, "write the majority's output hashes to FILE (a golden run)");
  sub->add_option("--against", f->against, "compare every repetition with a golden run recorded by --record");
  sub->add_option("--scheme", f->scheme, "the quantize workload's scheme")->capture_default_str();
  sub->add_option("--seq", f->seq, "the attention workload's length (T = S)")->capture_default_str();
  sub->add_option("--decode-seq", f->decode_seq, "the decode workload's keys S (T = 1)")->capture_default_str();
  sub->add_option("--seed", f->seed, "input seed")->capture_default_str();
  add_report_flags(sub, f->out);
  sub->callback([f] {
    probes::burnin_options o;
    o.provider.backend = f->backend;
    const std::string kind = parse_backend_spec(f->backend).kind;
    if (f->reps < 0) throw_input_error("--reps", "must be at least 1");
    if (f->reps > 0 && f->duration > 0) throw_input_error("--reps", "give --reps or --duration, not both");
    if (f->duration < 0 || !std::isfinite(f->duration)) throw_input_error("--duration", "must be a positive number of seconds");
    o.reps = f->reps == 0 && f->duration == 0 ? 3 : f->reps;
    o.duration_s = f->duration;
    if (!(f->mad_k > 0) || !std::isfinite(f->mad_k)) throw_input_error("--mad-k", "must be a positive number");
    if (!(f->mad_floor >= 0) || f->mad_floor >= 1) throw_input_error("--mad-floor", "must be in [0, 1)");
    o.mad_k = f->mad_k;
    o.mad_floor = f->mad_floor;
    if (f->seq < 1 || f->seq > 4096) throw_input_error("--seq", "must be in 1..4096");
    if (f->decode_seq < 1 || f->decode_seq > 65536) throw_input_error("--decode-seq", "must be in 1..65536");
    o.seed = f->seed;
    o.scheme = f->scheme;
    attention_case a;
    a.seq = f->seq;
    a.queries = 0;
    a.heads = 4;
    a.kv_heads = 2;
    a.head_dim = 64;
    a.mask = mask_kind::m_causal;
    a.seed = f->seed;
    a.validate();
    o.attention = a;
    attention_case d = a;
    d.seq = f->decode_seq;
    d.queries = 1;
    d.mask = mask_kind::m_none;
    d.validate();
    o.decode = d;
    for (const auto& text : f->faults) {
      const auto colon = text.find(':');
      std::int64_t dev = -1;
      if (colon != std::string::npos && colon > 0 &&
          text.substr(0, colon).find_first_not_of("0123456789") == std::string::npos && colon < 6)
        dev = std::stoll(text.substr(0, colon));
      if (dev < 0) throw_input_error("--fault", fmt::format("'{}' is not DEV:KIND (e.g. 1:bitflip)", text));
      o.faults[static_cast<int>(dev)] = probes::parse_burnin_fault(text.substr(colon + 1), "--fault");
    }
    if (!f->against.empty()) {
      constexpr std::size_t k_max_golden_bytes = std::size_t{1} << 20;
      o.golden = nlohmann::json::parse(io::read_text_file(f->against, k_max_golden_bytes, "burnin golden file"),
                                       nullptr, false);
      if (o.golden.is_discarded()) throw_input_error(f->against, "not JSON");
      if (o.golden.is_null()) throw_input_error(f->against, "not a burnin golden file (written by burnin --record)");
    }
    o.devices = parse_devices(f->devices, kind);
    const auto r = probes::run_burnin(o);
    if (!f->record.empty()) write_json(f->record, probes::burnin_golden(r));
    result::check_result c;
    probes::fill_result(r, c);
    const int code = r.outliers() > 0 ? 1 : 0;
    write_command_reports(f->out, "burnin", o.seed, std::move(c), code);
    exit_status() = code;
  });
}

}  // namespace numprobe::cli
