#pragma once
// Shared helpers of the GPU tests: device detection (tests skip cleanly without a device), the
// provider under test, and the accuracy measures they bound.
//
// The accuracy bound (basis: FlashAttention's own test criterion, DESIGN.md "A dimensionless
// bound"): on the same rounded inputs, the kernel's relative RMS error of O against
// numprobe::reference::attention must be at most 2x that of reference::attention_naive, the
// same-precision framework baseline. A NaN anywhere in the kernel's output fails.
//
// The LSE bound: |lse - lse_ref| <= 1e-3 + D * 2^-24 * |lse_ref|. Basis: the kernel keeps
// scores, m and l in fp32; an fp32 dot product of length D has relative error up to about
// D * u_fp32 (u = 2^-24), which dominates for large logits (the shifted family, |lse| ~ 2e4);
// the 1e-3 nats absolute term covers ex2.approx and the running sum (~1e-6 each), and is still
// 30x below a bf16 ulp of a typical LSE. Fully masked rows: O exactly 0 and LSE exactly -inf.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/row_sampling.hpp"
#include "numprobe/reference/attention.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/cuda_provider.hpp"

namespace numprobe::gpu::testing {

inline bool have_device() {
#if NUMPROBE_HAVE_CUDA
  return cuda_api().device_count() > 0;
#else
  return false;
#endif
}

#define NUMPROBE_REQUIRE_GPU()                                          \
  do {                                                                  \
    if (!::numprobe::gpu::testing::have_device())                       \
      GTEST_SKIP() << "no CUDA device (or CUDA not compiled in)";       \
  } while (0)

// gtest parameter names allow only [A-Za-z0-9_].
inline std::string sanitize(const std::string& id) {
  std::string out;
  for (char ch : id) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    if (ok) out += ch;
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

inline std::unique_ptr<attention_provider> gpu_provider(std::vector<std::string> faults = {},
                                                        std::optional<tile_shape> tile = {}) {
  provider_options o;
  o.backend = "cuda";
  o.faults = std::move(faults);
  o.tile = tile;
  return make_cuda_provider(o);
}

// Every row for short cases; a stratified sample (first/last row of each query tile, rows whose
// key range ends on a key-tile boundary or one past it, seeded random rows) for long ones.
inline std::vector<std::int64_t> test_rows(const attention_case& c, tile_shape tiles,
                                           std::int64_t max_rows = 64) {
  if (c.rows() <= 2 * max_rows) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
    std::iota(rows.begin(), rows.end(), std::int64_t{0});
    return rows;
  }
  row_sampling s;
  s.max_rows = max_rows;
  s.tile_q = tiles.q;
  s.tile_k = tiles.k;
  s.seed = c.seed;
  return sample_rows(c, s);
}

inline std::size_t count_nan(const attention_output& out) {
  std::size_t n = 0;
  for (double x : out.o) n += std::isnan(x) ? 1 : 0;
  for (double x : out.lse) n += std::isnan(x) ? 1 : 0;
  return n;
}

// sqrt(sum (o - r)^2 / sum r^2) over all returned elements; NaN propagates.
inline double rel_rms(const attention_output& got, const attention_output& ref) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < ref.o.size(); ++i) {
    const double e = got.o[i] - ref.o[i];
    num += e * e;
    den += ref.o[i] * ref.o[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct accuracy {
  double kernel = 0.0;  // rel RMS of the kernel vs reference::attention
  double naive = 0.0;   // rel RMS of reference::attention_naive vs reference::attention
  double lse_max_abs = 0.0;
  double lse_bound_use = 0.0;  // max over rows of |lse - lse_ref| / bound (<= 1 passes)
  std::size_t nan = 0;
  std::size_t masked_rows_bad = 0;  // (row, head) with reference LSE -inf but kernel O != 0 or LSE != -inf
  std::size_t masked_rows = 0;
  [[nodiscard]] double ratio() const { return naive > 0.0 ? kernel / naive : kernel; }
  [[nodiscard]] bool within_bound() const {
    return nan == 0 && masked_rows_bad == 0 && kernel <= 2.0 * naive && lse_bound_use <= 1.0;
  }
};

inline accuracy measure(attention_provider& p, const attention_case& c) {
  const attention_inputs in(c, false);
  const auto rows = test_rows(c, p.tiles());
  const std::vector<double> q = in.q_rows(rows);
  const attention_output ref = reference::attention(c, q, rows, in.k(), in.v());
  const attention_output naive = reference::attention_naive(c, q, rows, in.k(), in.v());
  const attention_output got = p.run(in, rows);
  EXPECT_EQ(got.rows, rows);
  accuracy a;
  a.kernel = rel_rms(got, ref);
  a.naive = rel_rms(naive, ref);
  a.nan = count_nan(got);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::size_t li = i * static_cast<std::size_t>(c.heads) + static_cast<std::size_t>(h);
      const double lr = ref.lse[li], lg = got.lse[li];
      if (std::isinf(lr) && lr < 0) {
        ++a.masked_rows;
        bool zero = true;
        for (std::int64_t d = 0; d < c.head_dim; ++d) zero = zero && got.o_at(i, h, d) == 0.0;
        if (!zero || !(std::isinf(lg) && lg < 0)) ++a.masked_rows_bad;
      } else {
        const double err = std::abs(lg - lr);
        const double bound = 1e-3 + static_cast<double>(c.head_dim) * 0x1.0p-24 * std::abs(lr);
        a.lse_max_abs = std::max(a.lse_max_abs, err);
        a.lse_bound_use = std::max(a.lse_bound_use, std::isnan(err) ? INFINITY : err / bound);
      }
    }
  }
  if (std::isnan(a.lse_max_abs)) a.lse_max_abs = INFINITY;
  return a;
}

}  // namespace numprobe::gpu::testing
