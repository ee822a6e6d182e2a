// The cost of a batch-invariant split-KV decode (issue 30): the built-in CUDA decode with its
// default geometry (4 splits of ceil(S_max / 4) keys, so a sequence's split boundaries follow
// the longest sequence of its batch) against a fixed split size (`--split-size N`: boundaries at
// multiples of N whatever the batch holds), on the launch `--backend cuda --decode` makes (the
// built-in kernel table's numprobe_attention_decode_variant). In one process, the calls
// alternating in blocks, so drift of clocks hits every configuration; medians of the kernel
// time (events around the launches). For each configuration it also checks batch invariance
// itself: the first sequence decoded alone against the same sequence inside the batch, bit
// for bit.
//
//   split_size_bench [iterations=10] [device=0]      (each call uploads the whole K/V cache)
//
// One line per configuration: "bench split-size shape=... config=... kernel_ms=...
// ratio_to_default=... member0_identical_to_alone=yes|no".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/builtin_kernel_table.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/host_dtype.hpp"
#include "src/providers/plugin_library.hpp"

namespace {

namespace gpu = numprobe::gpu;
using numprobe::formats::format_id;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<float> random_bf16(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(numprobe::decode16(format_id::m_bf16, numprobe::encode16(format_id::m_bf16, d(g))));
  return x;
}

struct shape {
  std::string name;
  std::vector<std::int32_t> lens;  // one per sequence; all equal: a uniform batch
  std::int64_t hq = 32, hkv = 8, d = 128;
};

struct config {
  std::string name;
  int splits = 4;
  std::int64_t split_size = 0;
};

void bench(const shape& sh, int iters, int device, numprobe::plugin::library& lib) {
  const auto batch = static_cast<std::int64_t>(sh.lens.size());
  const std::int64_t s_max = *std::max_element(sh.lens.begin(), sh.lens.end());
  const bool ragged = std::any_of(sh.lens.begin(), sh.lens.end(), [&](std::int32_t n) { return n != s_max; });
  const std::vector<float> q = random_bf16(static_cast<std::size_t>(batch * sh.hq * sh.d), 1),
                           k = random_bf16(static_cast<std::size_t>(batch * s_max * sh.hkv * sh.d), 2),
                           v = random_bf16(static_cast<std::size_t>(batch * s_max * sh.hkv * sh.d), 3);
  const std::vector<config> configs{{"default(4 splits of ceil(S_max/4))", 4, 0},
                                    {"split-size=256", 1, 256},
                                    {"split-size=512", 1, 512},
                                    {"split-size=1024", 1, 1024}};
  gpu::decode_request base;
  base.batch = batch;
  base.t = 1;
  base.s = s_max;
  base.hq = sh.hq;
  base.hkv = sh.hkv;
  base.d = sh.d;
  base.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sh.d)));
  base.device = device;
  base.q = q.data();
  base.k = k.data();
  base.v = v.data();
  base.seq_lens = ragged ? sh.lens.data() : nullptr;
  base.abi_decode = lib.decode_variant();
  base.abi_last_error = lib.last_error();
  if (!base.abi_decode) throw std::runtime_error("the built-in kernel table has no decode variant entry");
  const gpu::decode_api& api = gpu::cuda_decode_api();
  std::vector<gpu::decode_request> reqs;
  for (const auto& c : configs) {
    gpu::decode_request r = base;
    r.splits = c.splits;
    r.split_size = c.split_size;
    reqs.push_back(r);
  }
  // Batch invariance: sequence 0 alone (its own length, batch 1) against row 0 of the batch.
  std::vector<std::string> identical;
  for (const auto& r : reqs) {
    gpu::decode_request alone = r;
    alone.batch = 1;
    alone.s = sh.lens[0];
    alone.seq_lens = nullptr;
    const auto a = api.decode(alone);
    const auto b = api.decode(r);
    const std::size_t n = static_cast<std::size_t>(sh.hq * sh.d);
    identical.push_back(std::memcmp(a.o.data(), b.o.data(), n * 4) == 0 ? "yes" : "no");
  }
  std::vector<std::vector<double>> ms(reqs.size());
  for (int w = 0; w < 5; ++w)
    for (const auto& r : reqs) (void)api.decode(r);
  for (int i = 0; i < iters; i += 10)
    for (std::size_t c = 0; c < reqs.size(); ++c)
      for (int j = 0; j < 10; ++j) ms[c].push_back(api.decode(reqs[c]).kernel_ms);
  const double ref = median(ms[0]);
  for (std::size_t c = 0; c < reqs.size(); ++c)
    std::printf("bench split-size shape=%s config=%s kernel_ms=%.4f ratio_to_default=%.3f member0_identical_to_alone=%s\n",
                sh.name.c_str(), configs[c].name.c_str(), median(ms[c]), median(ms[c]) / ref, identical[c].c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::max(10, std::atoi(argv[1])) : 10;
  const int device = argc > 2 ? std::atoi(argv[2]) : 0;
  try {
    if (gpu::cuda_api().device_count() == 0) {
      std::printf("bench split-size skipped: no CUDA device (%s)\n", gpu::cuda_api().no_device_reason().c_str());
      return 0;
    }
    numprobe::plugin::library lib(gpu::cuda_builtin_kernel_table(), "built-in cuda kernels", device);
    // Serving-like decode batches, Hq 32, Hkv 8, D 128, bf16.
    std::mt19937 g(7);
    std::uniform_int_distribution<std::int32_t> len(512, 8192);
    shape ragged{"ragged-B16-512..8192", {}};
    ragged.lens.push_back(3000);  // sequence 0: shorter than the longest
    for (int i = 1; i < 16; ++i) ragged.lens.push_back(len(g));
    ragged.lens[5] = 8192;
    bench(shape{"uniform-B16-S4096", std::vector<std::int32_t>(16, 4096)}, iters, device, lib);
    bench(ragged, iters, device, lib);
    bench(shape{"single-S32768", {32768}}, iters, device, lib);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "split_size_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
