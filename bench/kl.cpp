// `kl` against the time to read its two logit files, in the same run on the same files.
// Issue 6's target: within 2x of the read time for N=32768, V=128256 f32 (16 GiB per file).
//
//   bench_kl [--rows N] [--vocab V] [--dir DIR] [--threads T] [--cache cold|warm]
//   default N=4096, V=128256, /tmp, all cores, cold.
// Two .npy files are generated (base, and base plus noise), measured and deleted.
// cold: before each timed pass (read, kl, read again) the files' pages are dropped from the
// page cache (posix_fadvise DONTNEED after fsync), so every pass reads the disk. warm: the
// files are read once untimed first and nothing is dropped (meaningful only when both files
// fit in memory). The read baseline is read(2) of both files front to back in 4 MiB calls.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_files.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/io/npy.hpp"
#include "probes/kl/kl_probe.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

void write_logits(const std::string& path, std::uint64_t n, std::uint64_t v, double noise) {
  const std::vector<std::uint64_t> shape{n, v};
  const auto header = numprobe::io::npy_header(shape, numprobe::io::dtype::m_f32);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  std::vector<float> row(v);
  std::uint64_t s = 12345, t = 999;
  for (std::uint64_t r = 0; r < n; ++r) {
    for (auto& x : row) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      t = t * 6364136223846793005ull + 1442695040888963407ull;
      // Roughly logit-shaped: a spread of +-8 plus, for the candidate, small noise.
      const double base = static_cast<double>(static_cast<std::int32_t>(s >> 32)) * 0x1p-28;
      const double e = static_cast<double>(static_cast<std::int32_t>(t >> 32)) * 0x1p-31;
      x = static_cast<float>(base + noise * e);
    }
    f.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(v * 4));
  }
  f.close();  // the generator child leaves through _Exit, which runs no destructors
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t n = 4096, v = 128256;
  std::string dir = "/tmp", cache = "cold";
  unsigned threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rows") n = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--vocab") v = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--dir") dir = argv[i + 1];
    else if (a == "--threads") threads = static_cast<unsigned>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--cache") cache = argv[i + 1];
  }
  const std::string base = dir + "/numprobe_bench_kl_base.npy", cand = dir + "/numprobe_bench_kl_cand.npy";
  // Generated in a child so its buffers do not count in this process's peak RSS.
  if (const pid_t pid = ::fork(); pid == 0) {
    write_logits(base, n, v, 0.0);
    write_logits(cand, n, v, 0.05);
    std::_Exit(0);
  } else {
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
  const std::vector<std::string> files{base, cand};
  const bool cold = cache != "warm";
  double bytes = 0;
  if (cold) bench::drop_cache(files);
  else (void)bench::read_seconds(files, bytes);
  const double read1 = bench::read_seconds(files, bytes);
  if (cold) bench::drop_cache(files);
  numprobe::probes::kl_probe_options o;
  o.base = base;
  o.cand = cand;
  o.threads = threads;
  const auto t0 = clock_type::now();
  const auto r = numprobe::probes::run_kl(o);
  const double kl_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (cold) bench::drop_cache(files);
  const double read2 = bench::read_seconds(files, bytes);
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf("bench_kl: N=%llu V=%llu f32, %.2f GB in two files, %s cache, threads %u\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(v), bytes / 1e9,
              cold ? "cold" : "warm", threads);
  std::printf("  sequential read: %.2f s (%.0f MB/s), again after kl: %.2f s\n", read1,
              bytes / 1e6 / read1, read2);
  std::printf("  kl:              %.2f s (%.0f MB/s); ratio kl / read = %.2f (vs the faster read; "
              "%.2f vs the mean; target <= 2)\n",
              kl_s, bytes / 1e6 / kl_s, kl_s / std::min(read1, read2), 2 * kl_s / (read1 + read2));
  std::printf("  kld.mean %.4g  kld.p99 %.4g  top1 %.4f\n", r.summary.kld.mean, r.summary.kld.p99,
              r.summary.top1_agreement);
  std::printf("  peak RSS %.0f MiB\n", static_cast<double>(ru.ru_maxrss) / 1024.0);
  std::filesystem::remove(base);
  std::filesystem::remove(cand);
  return 0;
}
