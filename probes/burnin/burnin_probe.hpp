#pragma once
// `numprobe burnin` (issue 32 B): the same seeded work on every device, compared. Each repetition
// runs three workloads on every device in turn (attention prefill, split-KV decode, a block
// quantize); each output is hashed (FNV-1a 64 of its bytes, output_hash.hpp). A device is
// - identical when every repetition's hash of every workload equals the majority of the devices'
//   (and the recorded golden run's, with --against);
// - deterministic when its repetitions agree with one another;
// - an outlier when it is not identical or not deterministic, or when its throughput lies more
//   than k MADs from the devices' median (judge_burnin).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/result.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::probes {

// Test hooks of the emulated fleet (`--fault DEV:KIND`, --backend emu only): a device that
// computes one wrong bit every repetition (bitflip), one that does so on odd repetitions only
// (flaky), one that does its work four times over, a quarter of the throughput (slow).
enum class burnin_fault : std::uint8_t { m_bitflip, m_flaky, m_slow };
// "bitflip", "flaky", "slow"; throws numprobe::error (exit 2) naming `where` otherwise.
[[nodiscard]] burnin_fault parse_burnin_fault(const std::string& s, const std::string& where);
[[nodiscard]] const char* name(burnin_fault f);

struct burnin_options {
  provider_options provider;  // backend (emu, cuda, hip) and knobs; the device is set per device
  std::vector<int> devices;   // ordinals; on emu, emulated devices (the same CPU)
  std::int64_t reps = 0;      // repetitions; 0: as many as --duration allows (at least 2)
  double duration_s = 0.0;
  double mad_k = 5.0;
  // The MAD (of the devices' relative speeds, burnin_device) is floored at this fraction of their
  // median: devices of one model that measure alike would otherwise make a MAD of timer noise,
  // and flag a device a few percent off. 0.05 with k = 5: a device 25% off the median is an outlier.
  double mad_floor = 0.05;
  attention_case attention;  // the prefill workload
  attention_case decode;     // the decode workload (T = 1, split-KV decode kernel)
  std::string scheme = "nvfp4";
  std::int64_t quant_rows = 64, quant_cols = 256;
  std::uint64_t seed = 7;
  std::map<int, burnin_fault> faults;
  nlohmann::json golden = nullptr;  // a recorded run (burnin_golden), or null
};

struct burnin_workload {
  std::string name;  // attention, decode, quantize
  std::string id;    // the case it runs (its canonical id)
};

struct burnin_device {
  int id = 0;
  std::string name;
  std::vector<std::vector<std::uint64_t>> hashes;  // [workload][rep]
  std::vector<double> rep_seconds;                 // one per repetition, all workloads
  double throughput = 0.0;  // repetitions per second: the median over repetitions
  double spread = 0.0;      // MAD of the per-repetition throughput / its median
  // (repetitions are timed after one untimed warm-up repetition per device)
  // What the throughput outliers are judged on: the median over repetitions of the fleet's
  // median time in that repetition over this device's time (1: as fast as the fleet's middle,
  // 0.25: a quarter of its speed). The devices run one after another within a repetition, so a
  // slow spell of the host that covers a repetition covers every device's share of it and cancels
  // here, where each device's own median throughput would keep it (docs/burnin.md).
  double relative_speed = 0.0;
  bool deterministic = true, identical = true;
  bool matches_golden = true;  // with a golden run
  std::vector<std::string> reasons;  // why it is an outlier; empty: it is not
};

struct burnin_result {
  burnin_options options;
  std::string backend;
  std::vector<burnin_workload> workloads;
  std::vector<burnin_device> devices;
  std::vector<std::uint64_t> majority;  // per workload: the devices' majority hash (0: no majority)
  double median_throughput = 0.0;  // the devices' throughputs' median (reps/s; reported, not judged)
  // The devices' relative speeds: their median, their MAD, and the MAD after --mad-floor.
  double median_relative_speed = 0.0, mad = 0.0, mad_used = 0.0;
  std::int64_t reps = 0;
  std::string clock;  // what timed the repetitions: "wall" (GPUs), "thread-cpu" (emulated devices, one core each)
  double seconds = 0.0;
  [[nodiscard]] std::size_t outliers() const;
};

// Runs the workloads on every device. Throws numprobe::error: exit 2 for bad options, 3 when a
// device or backend is unavailable.
[[nodiscard]] burnin_result run_burnin(const burnin_options& o);

// The verdicts from the hashes and the times alone (run_burnin calls it; tests call it on
// planted numbers): majority per workload, identical, deterministic, golden, throughput outliers.
void judge_burnin(burnin_result& r);

// The golden run to record (--record): the workloads' ids and the majority hashes.
[[nodiscard]] nlohmann::json burnin_golden(const burnin_result& r);

[[nodiscard]] nlohmann::json to_json(const burnin_result& r);
// The result model: metrics (devices, outliers, median throughput), the gate outliers <= 0, a
// table of devices, a throughput curve per device, to_json(r) as details.
void fill_result(const burnin_result& r, result::check_result& out);

}  // namespace numprobe::probes
