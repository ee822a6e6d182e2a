#pragma once
// Looped (online) softmax over long rows, one source for CUDA and HIP (issue 9).
//
// One block per row; the row is walked in chunks of `chunk` entries (any length: nothing of the
// row is kept in shared memory, so a 256K-entry vocabulary row has no shared-memory limit).
// The semantics are the emulator's (src/kernels/emu/looped_softmax.cpp), step for step:
//   z = cap * tanh(x / cap) when softcap > 0, then z / temperature (masked entries stay -inf);
//   pass 1, per chunk: block max -> m_new = max(m, chunk max); with the empty guard, m_use = 0
//   while m_new is -inf, else m_use = m_new; alpha = exp(m - m_use); a block-reduced chunk sum
//   cs of exp(z - m_use); l = round_l(round_l(alpha * l) + cs); m = m_new. m, l fp32.
//   pass 2: p = exp(z - m) / l, log p = (z - m) - log l, LSE = m + log l, cross-entropy =
//   log l - (z[target] - m); with the guard, l == 0 is the defined fully masked row (p = 0,
//   log p = -inf, LSE = -inf, cross-entropy 0). exp/log: accurate expf/logf.
// Fault variants (compile-time bits of gpu_api.hpp, the emulator's names):
//   k_fault_no_empty_guard   exp(-inf - -inf) = NaN reaches l on a fully masked leading chunk;
//   k_fault_rowsum_bf16      l rounded to bf16 after each update;
//   k_fault_finite_sentinel  m starts at -1e4 instead of -inf.
#include <cstdint>
#include <type_traits>

#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/platform.cuh"

namespace numprobe::gpu::softmax {

inline constexpr int k_threads = 256;
inline constexpr float k_sentinel = -1.0e4f;

template <class T>
struct params {
  const T* x = nullptr;               // [rows, V] logits in the case dtype (-inf masked)
  const std::int64_t* target = nullptr;  // [rows], -1: none
  float* p = nullptr;                 // [rows, V]
  float* logp = nullptr;              // [rows, V]
  float* lse = nullptr;               // [rows]
  float* ce = nullptr;                // [rows]
  std::int64_t vocab = 0, chunk = 0;
  float temperature = 1.f, softcap = 0.f;
};

template <class T>
__device__ __forceinline__ float load_z(const params<T>& p, const T* row, std::int64_t i) {
  float z;
  if constexpr (std::is_same_v<T, float>) z = row[i];
  else z = platform::to_float(row[i]);
  if (z == -__builtin_huge_valf()) return z;
  if (p.softcap > 0.f) z = p.softcap * tanhf(z / p.softcap);
  return z / p.temperature;
}

// Block reductions (warp shuffles, then across warps through shared memory); every thread
// gets the result.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* red) {
  constexpr int warps = k_threads / platform::warp_size;
#pragma unroll
  for (int o = platform::warp_size / 2; o > 0; o /= 2) {
    const float w = platform::shfl_xor(v, o);
    v = MAX ? fmaxf(v, w) : v + w;
  }
  const int lane = threadIdx.x % platform::warp_size, warp = threadIdx.x / platform::warp_size;
  __syncthreads();  // red[] may still be read by the previous reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
#pragma unroll
  for (int w = 1; w < warps; ++w) r = MAX ? fmaxf(r, red[w]) : r + red[w];
  return r;
}

template <std::uint32_t FAULTS>
__device__ __forceinline__ float round_l(float l) {
  if constexpr ((FAULTS & k_fault_rowsum_bf16) != 0)
    return platform::bf16_to_float(platform::float_to_bf16_rn(l));
  else
    return l;
}

template <class T, std::uint32_t FAULTS>
__global__ void __launch_bounds__(k_threads) looped_softmax(params<T> p) {
  constexpr bool guard = (FAULTS & k_fault_no_empty_guard) == 0;
  constexpr float ninf = -__builtin_huge_valf();
  __shared__ float red[k_threads / platform::warp_size];
  const std::int64_t r = blockIdx.x;
  const T* row = p.x + r * p.vocab;
  float m = (FAULTS & k_fault_finite_sentinel) ? k_sentinel : ninf;
  float l = 0.f;
  for (std::int64_t c0 = 0; c0 < p.vocab; c0 += p.chunk) {
    const std::int64_t c1 = c0 + p.chunk < p.vocab ? c0 + p.chunk : p.vocab;
    float cmax = ninf;
    for (std::int64_t i = c0 + threadIdx.x; i < c1; i += k_threads) cmax = fmaxf(cmax, load_z(p, row, i));
    cmax = block_reduce<true>(cmax, red);
    const float m_new = fmaxf(m, cmax);
    const float m_use = (guard && m_new == ninf) ? 0.f : m_new;
    const float alpha = expf(m - m_use);
    float s = 0.f;
    for (std::int64_t i = c0 + threadIdx.x; i < c1; i += k_threads) s += expf(load_z(p, row, i) - m_use);
    const float cs = block_reduce<false>(s, red);
    l = round_l<FAULTS>(round_l<FAULTS>(alpha * l) + cs);
    m = m_new;
  }
  float* pr = p.p + r * p.vocab;
  float* lr = p.logp + r * p.vocab;
  const std::int64_t t = p.target[r];
  if (guard && l == 0.f) {
    for (std::int64_t i = threadIdx.x; i < p.vocab; i += k_threads) {
      pr[i] = 0.f;
      lr[i] = ninf;
    }
    if (threadIdx.x == 0) {
      p.lse[r] = ninf;
      p.ce[r] = 0.f;
    }
    return;
  }
  const float log_l = logf(l);
  for (std::int64_t i = threadIdx.x; i < p.vocab; i += k_threads) {
    const float z = load_z(p, row, i);
    pr[i] = expf(z - m) / l;
    lr[i] = (z - m) - log_l;
  }
  if (threadIdx.x == 0) {
    p.lse[r] = m + log_l;
    p.ce[r] = t < 0 ? 0.f : log_l - (load_z(p, row, t) - m);
  }
}

}  // namespace numprobe::gpu::softmax
