// `scan` throughput with one format against a sequential read of the same files, in the same
// run, and the peak resident set (getrusage). Issue 6's target: >= 50% of the read speed on
// 2 cores with one format, memory bounded.
//
//   bench_scan [--mib N] [--format F] [--dir DIR] [--cache warm|cold|both] [--reps R]
//              [--prefetch MIB] [--keep 0|1]
//   default 2048 MiB of bf16, nvfp4, /tmp, warm, 1 repetition, the scan's default read-ahead
//   window (--prefetch 0: off), the generated files deleted at the end (--keep 1: kept, and
//   reused by the next run with the same --mib and --dir).
// A two-shard checkpoint with an index .json is generated, measured and deleted.
// warm: the files stay in the page cache, so the read baseline is a memory copy (~30 GB/s here)
// and the ratio measures the scan's arithmetic against memcpy. cold: before each timed pass
// the files' pages are dropped (bench_files.hpp), so both sides read the disk, as a first scan
// of a freshly downloaded checkpoint does; cold repetitions also time a second baseline, the
// read() loop with 512 MiB of kernel read-ahead requested (as the scan's reader keeps that many
// bytes coming), since a disk that serves deeper queues faster favours the scan otherwise. Each repetition times a read, then a scan, of each
// cache state asked for (alternating, so a drift in the machine's disk or load hits both), and
// its ratio is that repetition's read time over its scan time; the summary gives the median.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_files.hpp"
#include "numprobe/io/safetensors.hpp"
#include "probes/scan/scan_probe.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double cpu_seconds() {  // the whole process, all threads
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
constexpr std::uint64_t k_rows = 4096, k_cols = 8192;  // 64 MiB of bf16 per tensor

void write_shard(const std::string& path, int first_layer, int layers) {
  std::vector<std::vector<std::uint16_t>> data;
  std::vector<numprobe::io::tensor_to_write> ts;
  std::uint64_t s = 77 + static_cast<std::uint64_t>(first_layer);
  for (int l = first_layer; l < first_layer + layers; ++l) {
    auto& d = data.emplace_back(k_rows * k_cols);
    for (auto& x : d) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      float f = static_cast<float>(static_cast<std::int32_t>(s >> 32)) * 0x1p-36f;
      if ((s >> 20 & 0xFFF) == 0) f *= 50.0f;  // sparse outliers
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      x = static_cast<std::uint16_t>(u >> 16);
    }
    ts.push_back({"model.layers." + std::to_string(l / 4) + ".mlp." +
                      (l % 4 == 0 ? "gate_proj" : l % 4 == 1 ? "up_proj" : l % 4 == 2 ? "down_proj" : "o_proj") +
                      ".weight",
                  numprobe::io::dtype::m_bf16, {k_rows, k_cols}, std::as_bytes(std::span(d))});
  }
  numprobe::io::write_safetensors(path, ts);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t mib = 2048, prefetch_mib = numprobe::probes::scan_options{}.prefetch_window >> 20;
  std::string format = "nvfp4", dir = "/tmp", cache = "warm";
  int reps = 1;
  bool keep = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mib") mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--format") format = argv[i + 1];
    else if (a == "--dir") dir = argv[i + 1];
    else if (a == "--cache") cache = argv[i + 1];
    else if (a == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--prefetch") prefetch_mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--keep") keep = std::string(argv[i + 1]) != "0";
    else {
      std::fprintf(stderr, "bench_scan: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<bool> states;  // true: cold
  if (cache == "warm" || cache == "both") states.push_back(false);
  if (cache == "cold" || cache == "both") states.push_back(true);
  if (states.empty()) {
    std::fprintf(stderr, "bench_scan: --cache must be warm, cold or both\n");
    return 2;
  }
  const int tensors = static_cast<int>(std::max<std::uint64_t>(2, mib / 64));
  const std::string d = dir + "/numprobe_bench_scan";
  std::filesystem::create_directories(d);
  const std::vector<std::string> shards = {d + "/model-00001-of-00002.safetensors",
                                           d + "/model-00002-of-00002.safetensors"};
  const int half = tensors / 2;
  const std::string index = d + "/model.safetensors.index.json";
  std::error_code ec;
  const auto expect = static_cast<std::uintmax_t>(tensors) * k_rows * k_cols * 2;
  const bool have = std::filesystem::exists(index, ec) &&
                    std::filesystem::file_size(shards[0], ec) + std::filesystem::file_size(shards[1], ec) > expect &&
                    std::filesystem::file_size(shards[0], ec) + std::filesystem::file_size(shards[1], ec) <
                        expect + (1 << 20);
  if (!have) {
    if (const pid_t pid = ::fork(); pid == 0) {  // generator buffers stay out of our peak RSS
      write_shard(shards[0], 0, half);
      write_shard(shards[1], half, tensors - half);
      std::ofstream idx(index);
      idx << "{\"metadata\": {}, \"weight_map\": {";
      for (int l = 0; l < tensors; ++l)
        idx << (l ? ", " : "") << "\"model.layers." << l / 4 << ".mlp."
            << (l % 4 == 0 ? "gate_proj" : l % 4 == 1 ? "up_proj" : l % 4 == 2 ? "down_proj" : "o_proj")
            << ".weight\": \"" << (l < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors")
            << "\"";
      idx << "}}\n";
      idx.close();  // _Exit runs no destructors
      std::_Exit(0);
    } else {
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
  }
  const auto load = [] {
    std::string l = "?";
    if (std::ifstream la("/proc/loadavg"); la) la >> l;
    return l;
  };
  double bytes = 0;
  bench::read_seconds(shards, bytes);  // a first read: the host's cache settles, bytes known
  std::printf("bench_scan: %d bf16 tensors %llux%llu, %.2f GB in 2 shards, format %s, read-ahead window %llu MiB, %d repetition(s)\n",
              tensors, static_cast<unsigned long long>(k_rows), static_cast<unsigned long long>(k_cols),
              bytes / 1e9, format.c_str(), static_cast<unsigned long long>(prefetch_mib), reps);
  std::vector<std::vector<double>> ratios(states.size()), read_mb(states.size()), scan_mb(states.size());
  std::vector<double> ahead_ratios, ahead_mb;  // cold only
  long peak_before = 0;
  double worst_sqnr = 0;
  std::string worst_name = "-";
  for (int rep = 0; rep < reps; ++rep) {
    for (std::size_t si = 0; si < states.size(); ++si) {
      const bool cold = states[si];
      if (cold) bench::drop_cache(shards);
      const double read_s = bench::read_seconds(shards, bytes);
      double ahead_s = 0;
      if (cold) {
        bench::drop_cache(shards);
        ahead_s = bench::read_ahead_seconds(shards, bytes);
        bench::drop_cache(shards);
      }
      rusage before{};
      ::getrusage(RUSAGE_SELF, &before);
      if (peak_before == 0) peak_before = before.ru_maxrss;
      numprobe::probes::scan_options o;
      o.checkpoint = index;
      o.schemes = {format};
      o.prefetch_window = prefetch_mib << 20;
      const std::string load_before = load();
      const auto t0 = clock_type::now();
      const double cpu0 = cpu_seconds();
      const auto r = numprobe::probes::run_scan(o);
      const double scan_s = std::chrono::duration<double>(clock_type::now() - t0).count();
      const double scan_cpu = cpu_seconds() - cpu0;
      ratios[si].push_back(read_s / scan_s);
      if (cold) {
        ahead_ratios.push_back(ahead_s / scan_s);
        ahead_mb.push_back(bytes / 1e6 / ahead_s);
      }
      read_mb[si].push_back(bytes / 1e6 / read_s);
      scan_mb[si].push_back(bytes / 1e6 / scan_s);
      if (!r.tensors.empty()) {
        worst_name = r.tensors[0].name;
        worst_sqnr = r.tensors[0].results[0].sqnr_db;
      }
      // The machine may be shared: CPU seconds (all threads) and the load show how much of the
      // wall time the scan actually ran.
      std::printf("  rep %d %s: read %.2f s (%.0f MB/s), scan %.2f s (%.0f MB/s) = %.1f%% of read; scan CPU %.2f s (%.0f MB per CPU-second); load %s\n",
                  rep + 1, cold ? "cold" : "warm", read_s, bytes / 1e6 / read_s, scan_s, bytes / 1e6 / scan_s,
                  100.0 * read_s / scan_s, scan_cpu, bytes / 1e6 / scan_cpu, load_before.c_str());
      if (cold)
        std::printf("        read with 512 MiB read-ahead %.2f s (%.0f MB/s): scan = %.1f%% of it\n", ahead_s,
                    bytes / 1e6 / ahead_s, 100.0 * ahead_s / scan_s);
      std::fflush(stdout);
    }
  }
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  for (std::size_t si = 0; si < states.size(); ++si)
    std::printf("  median %s (%d reps, %u cores): read %.0f MB/s, scan %.0f MB/s, scan = %.1f%% of read speed (target >= 50%%)\n",
                states[si] ? "cold" : "warm", reps, std::thread::hardware_concurrency(), median(read_mb[si]),
                median(scan_mb[si]), 100.0 * median(ratios[si]));
  if (!ahead_ratios.empty())
    std::printf("  median cold, against a read with 512 MiB read-ahead: read %.0f MB/s, scan = %.1f%% of it\n",
                median(ahead_mb), 100.0 * median(ahead_ratios));
  std::printf("  worst tensor %s, sqnr %.2f dB\n", worst_name.c_str(), worst_sqnr);
  std::printf("  peak RSS %.0f MiB before the scans, %.0f MiB after (checkpoint %.0f MiB); load average now %s\n",
              static_cast<double>(peak_before) / 1024.0, static_cast<double>(after.ru_maxrss) / 1024.0,
              bytes / 1048576.0, load().c_str());
  if (!keep) std::filesystem::remove_all(d);
  return 0;
}
