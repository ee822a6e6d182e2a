#pragma once
// Online softmax state of one query row, shared by the tensor-core and the scalar attention
// kernels, with the emulator's named faults as compile-time switches (bits of FAULTS).
//
// Units: scores are kept in log2 units (x2 = logit * log2 e) so that p = 2^(x2 - m).
// Per key tile:   m_new = max(m, tile max)
//                 alpha = 2^(m_ref - m_use)      (the rescale of l and O)
//                 p     = 2^(x2 - m_use)
// with m_ref = m (the previous running max) and m_use = m_new, except where a fault says:
//   skip-rescale     alpha = 1 (O and l not rescaled when the max rises)
//   stale-max        m_ref = the running max from one tile earlier (m_{j-2}; m_{j-1} while
//                    there is none), so a rise is corrected against an outdated max
//   no-empty-guard   m_use = m_new even when it is -inf: exp(-inf - -inf) = NaN reaches l, O
//   finite-sentinel  the running max starts at -1e4 (logit units) instead of -inf
// rowsum-bf16, acc-bf16, mask-top-left and drop-tail-tile act in the kernels themselves.
#include <cstdint>

#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/platform.cuh"

namespace numprobe::gpu {

inline constexpr float k_log2e = 1.4426950408889634f;
inline constexpr float k_ln2 = 0.6931471805599453f;
inline constexpr float k_finite_sentinel = -1.0e4f;  // logit units

template <std::uint32_t FAULTS>
struct row_softmax {
  float m;       // running max, log2 units
  float m_prev;  // the running max one tile earlier (for stale-max)

  __device__ __forceinline__ void init() {
    m = (FAULTS & k_fault_finite_sentinel) ? k_finite_sentinel * k_log2e : -__builtin_huge_valf();
    m_prev = -__builtin_huge_valf();
  }

  // Takes this tile's row max (log2 units, -inf when no visible key), returns the factor that
  // rescales l and O, and the max to subtract inside exp2.
  __device__ __forceinline__ void update(float tile_max, float& alpha, float& m_use) {
    const float ninf = -__builtin_huge_valf();
    const float m_new = fmaxf(m, tile_max);
    float m_ref = m;
    if constexpr ((FAULTS & k_fault_stale_max) != 0) m_ref = (m_prev == ninf) ? m : m_prev;
    m_use = m_new;
    if constexpr ((FAULTS & k_fault_no_empty_guard) == 0) {
      if (m_new == ninf) m_use = 0.f;  // row has seen no valid key: p = 0, alpha = 0
    }
    alpha = platform::exp2_approx(m_ref - m_use);
    if constexpr ((FAULTS & k_fault_skip_rescale) != 0) alpha = 1.f;
    m_prev = m;
    m = m_new;
  }
};

// Adds one probability to a (partial) running sum, in the sum's storage dtype.
template <std::uint32_t FAULTS>
__device__ __forceinline__ float rowsum_add(float l, float p) {
  if constexpr ((FAULTS & k_fault_rowsum_bf16) != 0) return platform::round_bf16(l + p);
  else return l + p;
}
template <std::uint32_t FAULTS>
__device__ __forceinline__ float rowsum_scale(float l, float alpha) {
  if constexpr ((FAULTS & k_fault_rowsum_bf16) != 0) return platform::round_bf16(l * alpha);
  else return l * alpha;
}

// Keys visible to query t (0-based within its sequence): [lo, hi). Built from the mask
// definition (NUMERICS.md): bottom-right causal places query t at S - T + t.
struct key_bounds {
  std::int64_t lo, hi;
};

template <std::uint32_t FAULTS>
__device__ __forceinline__ key_bounds visible_keys(attention_mask mask, std::int64_t t,
                                                   std::int64_t n_q, std::int64_t n_k,
                                                   std::int64_t window) {
  const std::int64_t pos = n_k - n_q + t;
  std::int64_t lo = 0, hi = n_k;
  switch (mask) {
    case attention_mask::m_none: break;
    case attention_mask::m_causal:
      hi = ((FAULTS & k_fault_mask_top_left) != 0) ? t + 1 : pos + 1;
      break;
    case attention_mask::m_causal_top_left: hi = t + 1; break;
    case attention_mask::m_window:
      hi = pos + 1;
      lo = pos - window + 1;
      break;
  }
  if (lo < 0) lo = 0;
  if (hi > n_k) hi = n_k;
  if (hi < lo) hi = lo;
  return {lo, hi};
}

// Logit in log2 units: scale, then softcap (cap * tanh(x / cap)) when cap > 0.
__device__ __forceinline__ float logit_log2(float dot, float scale, float scale_log2, float cap) {
  if (cap > 0.f) return cap * tanhf(dot * scale / cap) * k_log2e;
  return dot * scale_log2;
}

}  // namespace numprobe::gpu
