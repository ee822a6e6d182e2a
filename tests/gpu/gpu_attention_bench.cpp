// Benchmark (not a test): TFLOP/s of the cuda flash-attention forward, tensor-core path, causal
// bf16, Hq=32, Hkv=8, D=128, at S = 4K (B=4) and 16K (B=1). Kernel time from device events,
// median of the timed runs. scripts/gpu_check.sh runs PyTorch SDPA (flash backend) on the same
// shapes in the same session and prints the ratio.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/gpu_api.hpp"

int main(int argc, char** argv) {
  using namespace numprobe::gpu;
  const backend_api& api = cuda_api();
  if (api.device_count() == 0) {
    fmt::print(stderr, "no CUDA device ({})\n", api.no_device_reason());
    return 3;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  struct shape {
    std::int64_t b, s;
  };
  try {
    for (const shape sh : {shape{4, 4096}, shape{1, 16384}}) {
      attention_request r;
      r.batch = sh.b;
      r.t = r.s = sh.s;
      r.hq = 32;
      r.hkv = 8;
      r.d = 128;
      r.scale = 1.0f / std::sqrt(128.0f);
      r.mask = attention_mask::m_causal;
      std::vector<float> q(static_cast<std::size_t>(r.batch * r.t * r.hq * r.d));
      std::vector<float> kv(static_cast<std::size_t>(r.batch * r.s * r.hkv * r.d));
      std::uint64_t x = 88172645463325252ull;
      auto rnd = [&] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53 * 2.0 - 1.0);
      };
      for (auto& e : q) e = rnd();
      for (auto& e : kv) e = rnd();
      const std::int64_t row = 0;
      r.q = q.data();
      r.k = kv.data();
      r.v = kv.data();
      r.rows = &row;
      r.n_rows = 1;
      std::vector<double> ms;
      for (int i = 0; i < reps + 1; ++i) {
        const attention_result res = api.attention_forward(r);
        if (i > 0) ms.push_back(res.kernel_ms);
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      const double flops = 4.0 * r.batch * r.hq * static_cast<double>(r.t) * r.s * r.d / 2.0;
      fmt::print("bench numprobe_cuda causal B={} S={} Hq=32 Hkv=8 D=128 bf16 ms={:.4f} tflops={:.1f}\n",
                 r.batch, r.s, med, flops / (med * 1e-3) / 1e12);
    }
  } catch (const numprobe::error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
