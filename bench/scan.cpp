// `scan` throughput with one format against a sequential read of the same files, in the same
// run, and the peak resident set (getrusage). Issue 6's target: >= 50% of the read speed on
// 2 cores with one format, memory bounded.
//
//   bench_scan [--mib N] [--format F] [--dir DIR] [--cache warm|cold]
//   default 2048 MiB of bf16, nvfp4, /tmp, warm.
// A two-shard checkpoint with an index .json is generated, measured and deleted.
// warm: the files stay in the page cache, so the read baseline is a memory copy (~30 GB/s here)
// and the ratio measures the scan's arithmetic against memcpy. cold: before each timed pass
// (read, scan, read again) the files' pages are dropped (bench_files.hpp), so both sides read
// the disk, as a first scan of a freshly downloaded checkpoint does.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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
#include "probes/scan_probe.hpp"

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
  std::uint64_t mib = 2048;
  std::string format = "nvfp4", dir = "/tmp", cache = "warm";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mib") mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--format") format = argv[i + 1];
    else if (a == "--dir") dir = argv[i + 1];
    else if (a == "--cache") cache = argv[i + 1];
  }
  const bool cold = cache == "cold";
  const int tensors = static_cast<int>(std::max<std::uint64_t>(2, mib / 64));
  const std::string d = dir + "/numprobe_bench_scan";
  std::filesystem::create_directories(d);
  const std::vector<std::string> shards = {d + "/model-00001-of-00002.safetensors",
                                           d + "/model-00002-of-00002.safetensors"};
  const int half = tensors / 2;
  if (const pid_t pid = ::fork(); pid == 0) {  // generator buffers stay out of our peak RSS
    write_shard(shards[0], 0, half);
    write_shard(shards[1], half, tensors - half);
    std::ofstream idx(d + "/model.safetensors.index.json");
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
  double bytes = 0;
  if (cold) bench::drop_cache(shards);
  const double read1 = bench::read_seconds(shards, bytes);
  if (cold) bench::drop_cache(shards);
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  numprobe::probes::scan_options o;
  o.checkpoint = d + "/model.safetensors.index.json";
  o.schemes = {format};
  const auto t0 = clock_type::now();
  const double cpu0 = cpu_seconds();
  const auto r = numprobe::probes::run_scan(o);
  const double scan_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  const double scan_cpu = cpu_seconds() - cpu0;
  if (cold) bench::drop_cache(shards);
  const double read2 = bench::read_seconds(shards, bytes);
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  const double read_s = std::min(read1, read2);
  std::printf("bench_scan: %d bf16 tensors %llux%llu, %.2f GB in 2 shards, format %s, %s cache\n", tensors,
              static_cast<unsigned long long>(k_rows), static_cast<unsigned long long>(k_cols),
              bytes / 1e9, format.c_str(), cold ? "cold" : "warm");
  std::printf("  sequential read: %.2f s (%.0f MB/s); again after scan: %.2f s\n", read1,
              bytes / 1e6 / read1, read2);
  std::printf("  scan:            %.2f s (%.0f MB/s) = %.1f%% of read speed (target >= 50%%)\n",
              scan_s, bytes / 1e6 / scan_s, 100.0 * read_s / scan_s);
  // The machine may be shared: CPU seconds (all threads) and the load show how much of the
  // wall time the scan actually ran.
  std::string load = "?";
  if (std::ifstream la("/proc/loadavg"); la) la >> load;
  std::printf("  scan CPU time:   %.2f s on %u cores (%.0f MB per CPU-second); load average %s\n",
              scan_cpu, std::thread::hardware_concurrency(), bytes / 1e6 / scan_cpu, load.c_str());
  std::printf("  worst tensor %s, sqnr %.2f dB\n", r.tensors.empty() ? "-" : r.tensors[0].name.c_str(),
              r.tensors.empty() ? 0.0 : r.tensors[0].results[0].sqnr_db);
  std::printf("  peak RSS %.0f MiB before scan, %.0f MiB after (checkpoint %.0f MiB)\n",
              static_cast<double>(before.ru_maxrss) / 1024.0,
              static_cast<double>(after.ru_maxrss) / 1024.0, bytes / 1048576.0);
  std::filesystem::remove_all(d);
  return 0;
}
