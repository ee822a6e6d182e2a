// Reference attention throughput against this machine's own double GEMM rate, both measured
// in this run (issue 2, "Performance"): target >= 50% of the GEMM rate for all rows of
// S = T = 8192, Hq = 8, Hkv = 2, D = 128. FLOPs count the two GEMM-shaped products only,
// 4 * D per visible (row, head, key); causal counts visible keys only.
#include <Eigen/Dense>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <string>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/reference/attention.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best of `reps` runs: the machine is shared, and the best run is the least disturbed one.
template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

double gemm_gflops(std::int64_t n) {
  const Eigen::MatrixXd a = Eigen::MatrixXd::Random(n, n), b = Eigen::MatrixXd::Random(n, n);
  Eigen::MatrixXd c(n, n);
  c.noalias() = a * b;  // warm-up: page faults and thread start-up out of the timing
  const double s = best_seconds(3, [&] { c.noalias() = a * b; });
  if (!std::isfinite(c(0, 0))) std::abort();
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / s * 1e-9;
}

constexpr const char* k_usage =
    "usage: bench_reference [SEQ]\n"
    "  Reference attention throughput at T = S = SEQ (default 8192), Hq = 8, Hkv = 2, D = 128,\n"
    "  unmasked and causal, against this machine's double GEMM rate measured in the same run.\n";

// SEQ from the command line: a whole number >= 1, all of the argument (std::stoll would throw
// on "--help" and take "12x" as 12).
std::int64_t parse_seq(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < 1) return -1;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace numprobe;
  std::int64_t seq = 8192;
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(k_usage, stdout);
    return 0;
  }
  if (argc > 2) {
    std::fprintf(stderr, "bench_reference: one argument (SEQ) expected, got %d; see --help\n", argc - 1);
    return 2;
  }
  if (argc == 2 && (seq = parse_seq(argv[1])) < 0) {
    std::fprintf(stderr, "bench_reference: SEQ must be a whole number >= 1, got '%s'; see --help\n", argv[1]);
    return 2;
  }
  const double gemm = gemm_gflops(2048);
  fmt::print("eigen double GEMM 2048^3: {:.1f} GFLOP/s (threads: {})\n", gemm, Eigen::nbThreads());

  for (const mask_kind mask : {mask_kind::m_none, mask_kind::m_causal}) {
    attention_case c;
    c.seq = seq;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = 128;
    c.mask = mask;
    c.dtype = formats::format_id::m_bf16;
    const attention_inputs in(c, false);
    const std::vector<double> q = in.q_all();
    std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
    double visible = 0;  // (row, key) pairs
    for (std::int64_t t = 0; t < c.t(); ++t) visible += static_cast<double>(reference::visible_keys(c, t).size());
    const double flops = 4.0 * visible * static_cast<double>(c.head_dim * c.heads);
    attention_output out;
    const double s = best_seconds(2, [&] { out = reference::attention(c, q, rows, in.k(), in.v()); });
    const double rate = flops / s * 1e-9;
    fmt::print("reference attention {}: {:.3f} s, {:.1f} GFLOP/s, {:.0f}% of GEMM\n", c.id(), s, rate,
               100.0 * rate / gemm);
    const double naive_s = best_seconds(1, [&] { out = reference::attention_naive(c, q, rows, in.k(), in.v()); });
    fmt::print("naive bf16 baseline     {}: {:.3f} s, {:.1f} GFLOP/s (fp32)\n", c.id(), naive_s,
               flops / naive_s * 1e-9);
  }
  return 0;
}
