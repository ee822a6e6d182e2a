// Per-call overhead of the plugin-ABI path of the built-in GPU kernels against their direct
// entry, in one process on one device (scripts/gpu_check.sh, section `abi`). Small cases, where
// a per-call cost would show:
//   forward  T = S = 128, Hq 8, Hkv 2, D 128, bf16, causal, 8 sampled rows: the cuda provider's
//            device-resident path (inputs uploaded once, as a drift sweep's points) with the
//            launch as dispatch_flash (direct) or as the built-in table's
//            numprobe_attention_forward_variant, loaded by plugin::library (abi, what
//            `--backend cuda` runs now); and, for scale, the same table through
//            plugin::library::invoke, which stages every buffer per call (`plugin-inproc:`).
//   decode   T = 1, S = 1024, Hq 8, Hkv 2, D 128, bf16, 4 splits, host in and out: decode_api
//            with the launch direct against the same call with the launch as the built-in
//            table's numprobe_attention_decode_variant, loaded by plugin::library (abi, what
//            `--backend cuda --decode` runs now); and, for scale, numprobe_attention_decode of
//            the same table through plugin::library::invoke (`plugin-inproc:`, decode_staged).
// Calls alternate between the paths in blocks, so drift of clocks hits both; medians of host
// wall time per call. One line per op: "bench abi op=... direct_us=... abi_us=... ratio=...".
//
//   abi_overhead_bench [iterations=400] [device=0]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <vector>

#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/builtin_kernel_table.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/gpu_resident.hpp"
#include "src/providers/host_dtype.hpp"
#include "src/providers/plugin_buffers.hpp"
#include "src/providers/plugin_library.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using numprobe::formats::format_id;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Runs a and b alternately in blocks of 10 calls after a warm-up; medians in microseconds.
std::pair<double, double> race(int iters, const std::function<void()>& a, const std::function<void()>& b) {
  for (int i = 0; i < 20; ++i) {
    a();
    b();
  }
  std::vector<double> ta, tb;
  const auto timed = [](const std::function<void()>& f, std::vector<double>& out) {
    const auto t0 = clock_type::now();
    f();
    out.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  };
  for (int i = 0; i < iters; i += 10)
    for (int j = 0; j < 10; ++j) {
      timed(a, ta);
      timed(b, tb);
    }
  return {median(ta), median(tb)};
}

std::vector<double> random_values(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> x(n);
  // Exact in bf16, so the float and 16-bit inputs of the two paths hold the same values.
  for (double& v : x) v = numprobe::decode16(format_id::m_bf16, numprobe::encode16(format_id::m_bf16, d(g)));
  return x;
}

void print(const char* op, const char* shape, double direct, double abi, const std::string& extra) {
  std::printf("bench abi op=%s %s direct_us=%.2f abi_us=%.2f ratio=%.3f%s\n", op, shape, direct, abi,
              direct > 0 ? abi / direct : 0.0, extra.c_str());
}

void bench_forward(int iters, int device, numprobe::plugin::library& lib) {
  namespace gpu = numprobe::gpu;
  const std::int64_t t = 128, s = 128, hq = 8, hkv = 2, d = 128;
  const std::vector<double> q = random_values(t * hq * d, 1), k = random_values(s * hkv * d, 2),
                            v = random_values(s * hkv * d, 3);
  std::vector<std::uint16_t> q16, k16, v16;
  numprobe::encode16_all(format_id::m_bf16, q, q16);
  numprobe::encode16_all(format_id::m_bf16, k, k16);
  numprobe::encode16_all(format_id::m_bf16, v, v16);
  const std::vector<std::int64_t> rows{0, 17, 33, 64, 90, 101, 126, 127};
  gpu::attention_request r;
  r.t = t;
  r.s = s;
  r.hq = hq;
  r.hkv = hkv;
  r.d = d;
  r.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  r.mask = gpu::attention_mask::m_causal;
  r.path = gpu::attention_path::m_mma;
  r.device = device;
  r.rows = rows.data();
  r.n_rows = static_cast<std::int64_t>(rows.size());
  gpu::resident_inputs cache_direct, cache_abi;
  const auto request = [&](gpu::resident_inputs& cache, numprobe_attention_forward_variant_fn fn) {
    gpu::resident_request in;
    in.q = q16.data();
    in.k = k16.data();
    in.v = v16.data();
    in.q_rows = t;
    in.kv_rows = s;
    in.cache = &cache;
    in.generation = 1;
    in.abi_forward = fn;
    return in;
  };
  const gpu::resident_api& api = gpu::cuda_resident_api();
  std::vector<double> ms_direct, ms_abi;
  double max_diff = 0.0;
  const auto direct = [&] {
    gpu::resident_timing tm;
    const auto res = api.forward(r, request(cache_direct, nullptr), &tm);
    ms_direct.push_back(tm.kernel_ms);
  };
  const auto abi = [&] {
    gpu::resident_timing tm;
    const auto res = api.forward(r, request(cache_abi, lib.forward_variant()), &tm);
    ms_abi.push_back(tm.kernel_ms);
  };
  {
    // Same kernel, same bits.
    const auto a = api.forward(r, request(cache_direct, nullptr), nullptr);
    const auto b = api.forward(r, request(cache_abi, lib.forward_variant()), nullptr);
    for (std::size_t i = 0; i < a.o.size(); ++i) max_diff = std::max<double>(max_diff, std::fabs(a.o[i] - b.o[i]));
  }
  const auto [us_direct, us_abi] = race(iters, direct, abi);
  print("forward", "T=128 S=128 Hq=8 Hkv=2 D=128 bf16 causal rows=8 resident", us_direct, us_abi,
        fmt::format(" kernel_ms_direct={:.4f} kernel_ms_abi={:.4f} max_abs_diff={} verdict={}",
                    median(ms_direct), median(ms_abi), max_diff,
                    max_diff == 0.0 && us_abi <= 1.10 * us_direct ? "ok" : "REGRESSION"));

  // For scale: the same table entry with every buffer staged per call (plugin-inproc:).
  std::vector<std::uint16_t> o16(static_cast<std::size_t>(t * hq * d));
  std::vector<float> lse(static_cast<std::size_t>(t * hq));
  const auto staged = [&] {
    numprobe::plugin::call c;
    numprobe_attention_params& p = c.forward;
    p.struct_size = sizeof(p);
    p.batch = 1;
    p.queries = t;
    p.seq = s;
    p.heads = hq;
    p.kv_heads = hkv;
    p.head_dim = d;
    p.scale = r.scale;
    p.mask = NUMPROBE_MASK_CAUSAL;
    p.case_dtype = NUMPROBE_DTYPE_BF16;
    p.q = numprobe::plugin::dense(q16.data(), NUMPROBE_DTYPE_BF16, {t, hq, d});
    p.k = numprobe::plugin::dense(k16.data(), NUMPROBE_DTYPE_BF16, {s, hkv, d});
    p.v = numprobe::plugin::dense(v16.data(), NUMPROBE_DTYPE_BF16, {s, hkv, d});
    p.o = numprobe::plugin::dense(o16.data(), NUMPROBE_DTYPE_BF16, {t, hq, d});
    p.lse = numprobe::plugin::dense(lse.data(), NUMPROBE_DTYPE_F32, {t, hq});
    p.memory = NUMPROBE_MEMORY_CUDA;
    p.device = device;
    c.regions = {{q16.data(), q16.size() * 2, false}, {k16.data(), k16.size() * 2, false},
                 {v16.data(), v16.size() * 2, false}, {o16.data(), o16.size() * 2, true},
                 {lse.data(), lse.size() * 4, true}};
    if (lib.invoke(c).status != NUMPROBE_STATUS_OK) std::abort();
  };
  const auto [us_direct2, us_staged] = race(iters, direct, staged);
  print("forward_staged", "T=128 S=128 Hq=8 Hkv=2 D=128 bf16 causal staged-per-call", us_direct2, us_staged, "");
}

void bench_decode(int iters, int device, numprobe::plugin::library& lib) {
  namespace gpu = numprobe::gpu;
  const std::int64_t s = 1024, hq = 8, hkv = 2, d = 128;
  const std::vector<double> q = random_values(hq * d, 4), k = random_values(s * hkv * d, 5),
                            v = random_values(s * hkv * d, 6);
  const std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
  gpu::decode_request dr;
  dr.t = 1;
  dr.s = s;
  dr.hq = hq;
  dr.hkv = hkv;
  dr.d = d;
  dr.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  dr.splits = 4;
  dr.device = device;
  dr.q = qf.data();
  dr.k = kf.data();
  dr.v = vf.data();
  const gpu::decode_api& api = gpu::cuda_decode_api();
  gpu::decode_request dr_abi = dr;
  dr_abi.abi_decode = lib.decode_variant();
  dr_abi.abi_last_error = lib.last_error();
  if (!dr_abi.abi_decode) throw std::runtime_error("the built-in kernel table has no decode variant entry");
  std::vector<double> ms_direct, ms_abi;
  const auto direct = [&] { ms_direct.push_back(api.decode(dr).kernel_ms); };
  const auto through_abi = [&] { ms_abi.push_back(api.decode(dr_abi).kernel_ms); };
  bool same = true;
  {
    // Same kernels, same bits (O, LSE and the split LSE).
    const auto a = api.decode(dr);
    const auto b = api.decode(dr_abi);
    same = a.o.size() == b.o.size() && a.lse.size() == b.lse.size() && a.split_lse.size() == b.split_lse.size() &&
           std::memcmp(a.o.data(), b.o.data(), a.o.size() * 4) == 0 &&
           std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0 &&
           std::memcmp(a.split_lse.data(), b.split_lse.data(), a.split_lse.size() * 4) == 0;
  }
  const auto [us_direct, us_abi] = race(iters, direct, through_abi);
  print("decode", "T=1 S=1024 Hq=8 Hkv=2 D=128 bf16 splits=4 host-in-out", us_direct, us_abi,
        fmt::format(" kernel_ms_direct={:.4f} kernel_ms_abi={:.4f} bit_identical={} verdict={}", median(ms_direct),
                    median(ms_abi), same ? "yes" : "no", same && us_abi <= 1.10 * us_direct ? "ok" : "REGRESSION"));

  numprobe::plugin::host_tensor qh(NUMPROBE_DTYPE_BF16, q), kh(NUMPROBE_DTYPE_BF16, k), vh(NUMPROBE_DTYPE_BF16, v);
  numprobe::plugin::host_tensor oh(NUMPROBE_DTYPE_BF16, static_cast<std::size_t>(hq * d));
  std::vector<float> lse(static_cast<std::size_t>(hq));
  std::int32_t seq_len = static_cast<std::int32_t>(s);
  const auto staged = [&] {
    numprobe::plugin::call c;
    c.is_decode = true;
    numprobe_decode_params p{};
    p.struct_size = sizeof(p);
    p.batch = 1;
    p.max_seq = s;
    p.heads = hq;
    p.kv_heads = hkv;
    p.head_dim = d;
    p.num_splits = 4;
    p.scale = dr.scale;
    p.q = numprobe::plugin::dense(qh.data(), NUMPROBE_DTYPE_BF16, {1, hq, d});
    p.k = numprobe::plugin::dense(kh.data(), NUMPROBE_DTYPE_BF16, {1, s, hkv, d});
    p.v = numprobe::plugin::dense(vh.data(), NUMPROBE_DTYPE_BF16, {1, s, hkv, d});
    p.seq_lens = numprobe::plugin::dense(&seq_len, NUMPROBE_DTYPE_I32, {1});
    p.o = numprobe::plugin::dense(oh.data(), NUMPROBE_DTYPE_BF16, {1, hq, d});
    p.lse = numprobe::plugin::dense(lse.data(), NUMPROBE_DTYPE_F32, {1, hq});
    p.memory = NUMPROBE_MEMORY_CUDA;
    p.device = device;
    c.decode.push_back(p);
    c.regions = {{qh.data(), qh.bytes(), false}, {kh.data(), kh.bytes(), false},
                 {vh.data(), vh.bytes(), false}, {oh.data(), oh.bytes(), true},
                 {&seq_len, sizeof(seq_len), false}, {lse.data(), lse.size() * 4, true}};
    if (lib.invoke(c).status != NUMPROBE_STATUS_OK) std::abort();
  };
  const auto [us_direct2, us_staged] = race(iters, direct, staged);
  print("decode_staged", "T=1 S=1024 Hq=8 Hkv=2 D=128 bf16 splits=4 staged-per-call", us_direct2, us_staged, "");
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::max(10, std::atoi(argv[1])) : 400;
  const int device = argc > 2 ? std::atoi(argv[2]) : 0;
  try {
    if (numprobe::gpu::cuda_api().device_count() == 0) {
      std::printf("bench abi skipped: no CUDA device (%s)\n", numprobe::gpu::cuda_api().no_device_reason().c_str());
      return 0;
    }
    numprobe::plugin::library lib(numprobe::gpu::cuda_builtin_kernel_table(), "built-in cuda kernels", device);
    bench_forward(iters, device, lib);
    bench_decode(iters, device, lib);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "abi_overhead_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
