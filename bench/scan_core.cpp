// bench_scan_core: the scan's fused quantizer (src/formats/rne_block_quantizer) alone, one thread,
// on a 2048 x 8192 bf16 tensor in memory (the same generator as bench_scan): the tensor amax
// pass then every block row through strip() with a summary, as the scan calls it. Prints the
// best of R runs in ns per element and MB/s of bf16 input; `chk` (the error sum plus the flush
// count) must not change between builds that claim the same results.
//   bench_scan_core [SCHEME] [R]   (default nvfp4 5)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cstdlib>
#include "src/formats/rne_block_quantizer.hpp"
#include "src/metrics/quant_error_sums.hpp"
#include "numprobe/formats/scheme.hpp"
#include <algorithm>
using namespace numprobe::formats;
int main(int argc, char** argv) {
  const char* scheme = argc > 1 ? argv[1] : "nvfp4";
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  const std::int64_t rows = 2048, cols = 8192;
  std::vector<std::uint16_t> d(rows * cols);
  std::uint64_t s = 77;
  for (auto& x : d) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float f = static_cast<float>(static_cast<std::int32_t>(s >> 32)) * 0x1p-36f;
    if ((s >> 20 & 0xFFF) == 0) f *= 50.0f;
    std::uint32_t u; std::memcpy(&u, &f, 4); x = static_cast<std::uint16_t>(u >> 16);
  }
  const auto c = find_scheme(scheme, "x").defaults;
  detail::rne_block_quantizer fq(c);
  double best = 1e9; double chk = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    double amax = detail::rne_block_quantizer::finite_amax(d.data(), detail::element_storage::m_bf16, d.size());
    fq.set_tensor_amax(amax);
    const auto g = grid_of(c, rows, cols);
    std::vector<block_stats> blocks(g.grid_cols);
    numprobe::metrics::quant_error_sums sums;
    std::int64_t fl = 0;
    for (std::int64_t br = 0; br < g.grid_rows; ++br) {
      detail::strip_summary sum;
      fq.strip(d.data(), detail::element_storage::m_bf16, cols, br * g.block_rows, std::min(g.block_rows, rows - br * g.block_rows), g.block_cols, blocks, sums, &sum);
      fl += sum.flushed;
    }
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, t); chk = sums.sum_sq_err + fl;
  }
  std::printf("%s: %.2f ns/elem, %.0f MB/s bf16 (1 thread) chk %.17g\n", scheme, best * 1e9 / (rows * cols), rows * cols * 2 / best / 1e6, chk);
}
