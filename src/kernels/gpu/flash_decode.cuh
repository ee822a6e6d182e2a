#pragma once
// Split-KV decode (flash-decoding), one source for CUDA and HIP.
//
// decode_split: one block per (split, query head, batch); T <= 8 queries share each K/V load.
// Keys of the split are taken in tiles of k_decode_tile: scores in fp32 (fp32 dot products of
// the input-dtype Q and K, times scale * log2 e), online softmax in base 2 with the guarded
// correction (a row that has seen no visible key keeps m = -inf and contributes nothing), P kept
// in fp32, O accumulated in fp32. Each split writes O_i (normalised, fp32) and LSE_i (natural
// log); a split with no visible key writes O_i = 0, LSE_i = -inf.
//
// decode_merge: LSE = m + log sum exp(LSE_i - m) (m = max LSE_i), O = sum exp(LSE_i - LSE) O_i,
// over non-empty splits only (an empty split's O_i is never read); every split empty gives
// O = 0, LSE = -inf. Output rounded to the input dtype.
//
// K/V element types: bf16/fp16, or e4m3fn bytes dequantized in the kernel as
// fp32(decode(code) * scale) with a per-tensor or per-KV-head fp32 scale.
//
// Fault flags (params::faults, run-time, the emulator's names and meanings):
//   gqa-mod          query head h reads KV head h % Hkv instead of h / (Hq / Hkv)
//   index-wrap       key j reads K/V row j mod 2^15 (the mask still uses j)
//   empty-split-nan  a split with no visible key writes O_i = 0/0 = NaN (LSE_i = -inf), and
//                    the merge weights every split by exp(LSE_i - LSE) = 0: 0 * NaN poisons
//                    the row whenever one of its splits is empty and another is not.
#include <cstdint>

#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/platform.cuh"
#include "src/kernels/gpu/quantize_codec.cuh"

namespace numprobe::gpu::decode {

inline constexpr int k_decode_threads = 128;
inline constexpr int k_decode_tile = 128;  // keys per tile (one per thread for the scores)
inline constexpr int k_decode_max_t = 8;
inline constexpr int k_decode_max_d = 256;
inline constexpr float k_log2e_f = 1.4426950408889634f;
inline constexpr float k_ln2_f = 0.6931471805599453f;

template <class T, class KV>
struct params {
  const T* q = nullptr;    // [B*T, Hq, D]
  const KV* k = nullptr;   // [B*S, Hkv, D]
  const KV* v = nullptr;
  const float* k_scale = nullptr;  // e4m3 KV: [1] or [Hkv]
  const float* v_scale = nullptr;
  bool per_head_scale = false;
  float* o_part = nullptr;    // [splits, B*T, Hq, D]
  float* lse_part = nullptr;  // [splits, B*T, Hq]
  float* o = nullptr;         // [B*T, Hq, D] (input dtype, widened)
  float* lse = nullptr;       // [B*T, Hq]
  int batch = 1, t = 1, hq = 1, hkv = 1, d = 0, splits = 1;
  std::int64_t s = 0, chunk = 0, window = 0;
  attention_mask mask = attention_mask::m_none;
  float scale_log2 = 0.f;
  // FP8 P (issue 9): P * p_prescale rounded to e4m3fn (RNE, saturating) and divided back for
  // P.V only (l keeps the fp32 P); acc_promote > 0 models the fp8 MMA accumulator: O kept with
  // acc_mantissa fraction bits (truncated) and added into an fp32 accumulator every
  // acc_promote key tiles (the emulator's model, src/kernels/emu/flash_attention.cpp).
  bool p_fp8 = false;
  float p_prescale = 1.f;
  int acc_promote = 0;
  int acc_mantissa = 13;
  std::uint32_t faults = 0;  // k_decode_faults bits (gpu_api.hpp)
};

// The K/V row of key j: j, or j mod 2^15 under index-wrap.
__device__ __forceinline__ std::int64_t key_row(std::int64_t j, std::uint32_t faults) {
  return (faults & k_fault_index_wrap) != 0 ? (j & (k_index_wrap_rows - 1)) : j;
}

// The emulator's truncate_mantissa: keep `bits` fraction bits, the rest truncated toward zero.
__device__ __forceinline__ double truncate_bits(double x, int bits) {
  if (x == 0.0 || !isfinite(x)) return x;
  int e = 0;
  const double f = frexp(x, &e);
  return ldexp(trunc(ldexp(f, bits + 1)), e - bits - 1);
}

template <class KV>
__device__ __forceinline__ float load_kv(const KV* base, std::int64_t i, float scale) {
  if constexpr (std::is_same_v<KV, std::uint8_t>) return codec::decode_e4m3(base[i]) * scale;
  else return platform::to_float(base[i]);
}

// Key j visible to query t (absolute position S - T + t, bottom-right alignment).
__device__ __forceinline__ bool visible(attention_mask m, std::int64_t s, int nt, int t,
                                        std::int64_t j, std::int64_t w) {
  const std::int64_t pos = s - nt + t;
  switch (m) {
    case attention_mask::m_causal: return j <= pos;
    case attention_mask::m_causal_top_left: return j <= t;
    case attention_mask::m_window: return j <= pos && j > pos - w;
    default: return true;
  }
}

template <class T, class KV>
__global__ void __launch_bounds__(k_decode_threads) decode_split(params<T, KV> p) {
  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = (p.faults & k_fault_gqa_mod) != 0 ? h % p.hkv : h / (p.hq / p.hkv);
  const int tid = threadIdx.x;
  const std::int64_t s0 = static_cast<std::int64_t>(split) * p.chunk;
  const std::int64_t s1 = s0 + p.chunk < p.s ? s0 + p.chunk : p.s;
  const float ks = p.k_scale ? p.k_scale[p.per_head_scale ? hk : 0] : 1.f;
  const float vs = p.v_scale ? p.v_scale[p.per_head_scale ? hk : 0] : 1.f;

  __shared__ float q_s[k_decode_max_t][k_decode_max_d];
  __shared__ float p_s[k_decode_max_t][k_decode_tile];
  __shared__ float pq_s[k_decode_max_t][k_decode_tile];  // P as P.V reads it (fp8 P: quantized)
  __shared__ float m_s[k_decode_max_t], l_s[k_decode_max_t], alpha_s[k_decode_max_t];
  for (int i = tid; i < p.t * p.d; i += k_decode_threads) {
    const int t = i / p.d, e = i % p.d;
    q_s[t][e] = platform::to_float(p.q[((static_cast<std::int64_t>(b) * p.t + t) * p.hq + h) * p.d + e]);
  }
  if (tid < p.t) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.f;
  }
  constexpr int k_acc = k_decode_max_d / k_decode_threads;
  float acc[k_decode_max_t][k_acc];
  float acc32[k_decode_max_t][k_acc];  // fp8 accumulator model: the promoted fp32 part
#pragma unroll
  for (int t = 0; t < k_decode_max_t; ++t)
#pragma unroll
    for (int a = 0; a < k_acc; ++a) acc[t][a] = acc32[t][a] = 0.f;
  int since_promote = 0;
  __syncthreads();

  for (std::int64_t j0 = s0; j0 < s1; j0 += k_decode_tile) {
    // Scores: thread tid takes key j0 + tid for every query.
    const std::int64_t j = j0 + tid;
    for (int t = 0; t < p.t; ++t) p_s[t][tid] = -INFINITY;
    if (j < s1) {
      const std::int64_t kr = ((static_cast<std::int64_t>(b) * p.s + key_row(j, p.faults)) * p.hkv + hk) * p.d;
      float dot[k_decode_max_t];
#pragma unroll
      for (int t = 0; t < k_decode_max_t; ++t) dot[t] = 0.f;
      for (int e = 0; e < p.d; ++e) {
        const float kv = load_kv(p.k, kr + e, ks);
#pragma unroll
        for (int t = 0; t < k_decode_max_t; ++t)
          if (t < p.t) dot[t] = fmaf(q_s[t][e], kv, dot[t]);
      }
      for (int t = 0; t < p.t; ++t)
        if (visible(p.mask, p.s, p.t, t, j, p.window)) p_s[t][tid] = dot[t] * p.scale_log2;
    }
    __syncthreads();
    // Row max and correction (one thread per query row).
    if (tid < p.t) {
      float mx = m_s[tid];
      for (int i = 0; i < k_decode_tile; ++i) mx = fmaxf(mx, p_s[tid][i]);
      // exp(-inf - -inf) guarded: a row with no visible key so far keeps l = 0, O = 0.
      alpha_s[tid] = mx == -INFINITY ? 1.f : platform::exp2_approx(m_s[tid] - mx);
      m_s[tid] = mx;
    }
    __syncthreads();
    for (int t = 0; t < p.t; ++t) {
      const float mx = m_s[t];
      const float sc = p_s[t][tid];
      const float pv = (mx == -INFINITY || sc == -INFINITY) ? 0.f : platform::exp2_approx(sc - mx);
      p_s[t][tid] = pv;
      pq_s[t][tid] = p.p_fp8 ? codec::decode_e4m3(codec::encode_e4m3_sw(pv * p.p_prescale)) / p.p_prescale : pv;
    }
    __syncthreads();
    if (tid < p.t) {
      float sum = 0.f;
      for (int i = 0; i < k_decode_tile; ++i) sum += p_s[tid][i];
      l_s[tid] = alpha_s[tid] * l_s[tid] + sum;
    }
    // P V: thread owns columns tid + 128 a.
    const std::int64_t n_keys = (s1 - j0) < k_decode_tile ? (s1 - j0) : k_decode_tile;
#pragma unroll
    for (int a = 0; a < k_acc; ++a) {
      const int e = tid + a * k_decode_threads;
      if (e >= p.d) continue;
      float part[k_decode_max_t];
#pragma unroll
      for (int t = 0; t < k_decode_max_t; ++t) part[t] = 0.f;
      for (int i = 0; i < n_keys; ++i) {
        const float vv = load_kv(p.v, ((static_cast<std::int64_t>(b) * p.s + key_row(j0 + i, p.faults)) * p.hkv + hk) * p.d + e, vs);
#pragma unroll
        for (int t = 0; t < k_decode_max_t; ++t)
          if (t < p.t) part[t] = fmaf(pq_s[t][i], vv, part[t]);
      }
#pragma unroll
      for (int t = 0; t < k_decode_max_t; ++t) {
        if (t >= p.t) continue;
        if (p.acc_promote > 0) {
          acc32[t][a] = alpha_s[t] * acc32[t][a];
          acc[t][a] = static_cast<float>(truncate_bits(
              truncate_bits(static_cast<double>(alpha_s[t] * acc[t][a]), p.acc_mantissa) +
                  static_cast<double>(part[t]),
              p.acc_mantissa));
        } else {
          acc[t][a] = alpha_s[t] * acc[t][a] + part[t];
        }
      }
    }
    if (p.acc_promote > 0 && ++since_promote == p.acc_promote) {
#pragma unroll
      for (int t = 0; t < k_decode_max_t; ++t)
#pragma unroll
        for (int a = 0; a < k_acc; ++a) {
          acc32[t][a] += acc[t][a];
          acc[t][a] = 0.f;
        }
      since_promote = 0;
    }
    __syncthreads();
  }
  if (p.acc_promote > 0)
#pragma unroll
    for (int t = 0; t < k_decode_max_t; ++t)
#pragma unroll
      for (int a = 0; a < k_acc; ++a) acc[t][a] += acc32[t][a];
  // Normalise and write the split's (O_i, LSE_i).
  for (int t = 0; t < p.t; ++t) {
    const std::int64_t row = (static_cast<std::int64_t>(split) * p.batch + b) * p.t + t;
    const float l = l_s[t];
    // empty-split-nan drops this guard: acc / l = 0 / 0, and m + log2(0) = -inf.
    const bool empty = !(l > 0.f) && (p.faults & k_fault_empty_split_nan) == 0;
#pragma unroll
    for (int a = 0; a < k_acc; ++a) {
      const int e = tid + a * k_decode_threads;
      if (e < p.d) p.o_part[(row * p.hq + h) * p.d + e] = empty ? 0.f : acc[t][a] / l;
    }
    if (tid == 0)
      p.lse_part[row * p.hq + h] = empty ? -INFINITY : (m_s[t] + log2f(l)) * k_ln2_f;
  }
}

// One block per (row, head): the LSE merge over splits (natural log, accurate expf/logf).
template <class T, class KV>
__global__ void decode_merge(params<T, KV> p) {
  const std::int64_t rh = blockIdx.x;  // (b*T + t) * Hq + h
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.t;
  const std::int64_t stride = rows * p.hq;
  float mx = -INFINITY;
  for (int i = 0; i < p.splits; ++i) mx = fmaxf(mx, p.lse_part[i * stride + rh]);
  if (mx == -INFINITY) {  // every split empty: O = 0, LSE = -inf, no NaN
    for (int e = threadIdx.x; e < p.d; e += blockDim.x) p.o[rh * p.d + e] = 0.f;
    if (threadIdx.x == 0) p.lse[rh] = -INFINITY;
    return;
  }
  float sum = 0.f;
  for (int i = 0; i < p.splits; ++i) {
    const float li = p.lse_part[i * stride + rh];
    if (li != -INFINITY) sum += expf(li - mx);
  }
  const float lse = mx + logf(sum);
  const bool read_empty = (p.faults & k_fault_empty_split_nan) != 0;  // weight 0 times O_i
  for (int e = threadIdx.x; e < p.d; e += blockDim.x) {
    float o = 0.f;
    for (int i = 0; i < p.splits; ++i) {
      const float li = p.lse_part[i * stride + rh];
      if (li == -INFINITY && !read_empty) continue;  // empty split: its O_i is not read
      o = fmaf(expf(li - lse), p.o_part[(i * stride + rh) * p.d + e], o);
    }
    p.o[rh * p.d + e] = platform::to_float(platform::from_float<T>(o));
  }
  if (threadIdx.x == 0) p.lse[rh] = lse;
}

}  // namespace numprobe::gpu::decode
