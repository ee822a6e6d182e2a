// bench_quant: element encode/decode throughput per format (Melem/s), and quantize+measure of
// a 4096x4096 fp32 tensor per scheme (MB/s of fp32 input), each against a plain sequential
// pass over the same buffer measured in the same run.
// Then the scan path's fused in-place analysis (scan_tensor_scheme on stored f32 and bf16
// elements) of the same tensor per scheme, against a sequential pass over those bytes.
//   bench_quant [--size N] [--scan-only] [--scheme S]   (N x N tensor, default 4096)
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "numprobe/base/rng.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/formats/scheme.hpp"
#include "probes/quant/quant_probe.hpp"
#include "probes/scan/scan_probe.hpp"

namespace nf = numprobe::formats;
namespace np = numprobe::probes;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

volatile double g_sink = 0;

// CPU time of the whole process (all threads): the machine may be shared, so the scan table
// also reports MB per CPU-second, which other load does not dilute.
double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}  // keeps the measured work from being optimised away

// The baseline: one sequential read of the buffer (a sum), the least any analysis must do.
double sequential_read_seconds(const std::vector<double>& x) {
  const auto t0 = std::chrono::steady_clock::now();
  double s = 0;
  for (double v : x) s += v;
  g_sink = s;
  return seconds_since(t0);
}

void codecs_and_quant(std::int64_t n);
void scan_analysis(std::int64_t n, const std::string& only);

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = 4096;
  bool scan_only = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--size") == 0 && i + 1 < argc) n = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--scan-only") == 0) scan_only = true;
    if (std::strcmp(argv[i], "--scheme") == 0 && i + 1 < argc) only = argv[i + 1];
  }
  if (!scan_only) codecs_and_quant(n);
  scan_analysis(n, only);
  return 0;
}

namespace {

void codecs_and_quant(std::int64_t n) {

  // Encode/decode: 4M seeded N(0,1) values scaled into each format's normal range.
  constexpr std::size_t k_elems = std::size_t{1} << 22;
  std::vector<double> x(k_elems);
  for (std::size_t i = 0; i < k_elems; ++i) x[i] = numprobe::normal_at(7, 0, i);
  const nf::format_id fmts[] = {nf::format_id::m_bf16,  nf::format_id::m_f16,
                                nf::format_id::m_e4m3fn, nf::format_id::m_e4m3fnuz,
                                nf::format_id::m_e5m2,  nf::format_id::m_e2m3,
                                nf::format_id::m_e3m2,  nf::format_id::m_e2m1,
                                nf::format_id::m_i8,    nf::format_id::m_i4};
  fmt::print("element codecs ({} values, single thread)\n", k_elems);
  fmt::print("{:<10} {:>14} {:>14}\n", "format", "encode Melem/s", "decode Melem/s");
  std::vector<std::uint32_t> codes(k_elems);
  for (auto f : fmts) {
    const double scale = nf::info(f).max_finite / 8;  // integers: values spread over the range
    auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < k_elems; ++i) codes[i] = nf::encode(f, x[i] * scale);
    const double te = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    double s = 0;
    for (std::size_t i = 0; i < k_elems; ++i) s += nf::decode(f, codes[i]);
    const double td = seconds_since(t0);
    g_sink = s;
    fmt::print("{:<10} {:>14.1f} {:>14.1f}\n", nf::name(f), k_elems / te * 1e-6, k_elems / td * 1e-6);
  }

  // Quantize + measure (the quant probe's analysis, without input generation).
  std::vector<double> t(static_cast<std::size_t>(n * n));
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<float>(np::quant_input_value(np::quant_dist::m_llm, 7, n, static_cast<std::int64_t>(i)));
  const double mb = static_cast<double>(t.size()) * 4 / 1e6;  // as fp32 input
  const double base = sequential_read_seconds(t);
  fmt::print("\nquantize+measure of a {}x{} fp32 tensor ({:.0f} MB), llm distribution\n", n, n, mb);
  fmt::print("baseline: sequential read {:.0f} MB/s\n", mb / base);
  fmt::print("{:<20} {:>8} {:>10} {:>9} {:>8}\n", "scheme", "seconds", "MB/s", "vs read", "sqnr_db");
  for (const char* s : {"none", "fp8-tensor", "fp8-channel", "fp8-block128", "fp8-act1x128",
                        "mxfp4", "mxfp8", "nvfp4", "int4-awq", "int4-sym"}) {
    np::quant_probe_options o;
    o.scheme_name = s;
    o.config = nf::find_scheme(s).defaults;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = np::analyze_quant(o, t, n, n);  // the copy of t is part of the cost
    const double sec = seconds_since(t0);
    fmt::print("{:<20} {:>8.3f} {:>10.1f} {:>8.3f}x {:>8.2f}\n", s, sec, mb / sec, base / sec,
               r.metrics.sqnr_db);
  }
}

// The scan path's analysis of stored elements (no copy, no decode to a buffer), per scheme,
// against one sequential pass over the same bytes (a sum of the 64-bit words).
void scan_analysis(std::int64_t n, const std::string& only) {
  const auto count = static_cast<std::size_t>(n * n);
  std::vector<float> f32(count);
  std::vector<std::uint16_t> bf16(count);
  for (std::size_t i = 0; i < count; ++i) {
    f32[i] = static_cast<float>(np::quant_input_value(np::quant_dist::m_llm, 7, n, static_cast<std::int64_t>(i)));
    std::uint32_t u;
    std::memcpy(&u, &f32[i], 4);
    bf16[i] = static_cast<std::uint16_t>(u >> 16);
  }
  const auto pass = [](const void* p, std::size_t bytes) {
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t s = 0;
    for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, static_cast<const char*>(p) + i, 8);
      s += w;
    }
    g_sink = static_cast<double>(s);
    return seconds_since(t0);
  };
  fmt::print("\nscan analysis in place of a {}x{} tensor (MB/s of stored bytes)\n", n, n);
  fmt::print("{:<14} {:>6} {:>10} {:>12} {:>9} {:>8} {:>14}\n", "scheme", "dtype", "MB/s",
             "read MB/s", "vs read", "sqnr_db", "MB/cpu-second");
  for (const char* s : {"nvfp4", "mxfp4", "fp8-block128", "fp8-channel", "int4-g128"}) {
    if (!only.empty() && only != s) continue;
    for (int d = 0; d < 2; ++d) {
      const void* data = d == 0 ? static_cast<const void*>(f32.data()) : bf16.data();
      const std::size_t bytes = count * (d == 0 ? 4 : 2);
      const double base = pass(data, bytes);
      const double c0 = cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      const auto r = np::scan_tensor_scheme(
          s, n, n, static_cast<const std::byte*>(data),
          d == 0 ? numprobe::io::dtype::m_f32 : numprobe::io::dtype::m_bf16, std::int64_t{1} << 20);
      const double sec = seconds_since(t0);
      const double cpu = cpu_seconds() - c0;
      const double mb = static_cast<double>(bytes) / 1e6;
      fmt::print("{:<14} {:>6} {:>10.0f} {:>12.0f} {:>8.3f}x {:>8.2f} {:>14.0f}\n", s,
                 d == 0 ? "f32" : "bf16", mb / sec, mb / base, base / sec, r.sqnr_db, mb / cpu);
    }
  }
}

}  // namespace
