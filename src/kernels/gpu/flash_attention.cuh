#pragma once
// Flash-attention forward (FlashAttention-2 schedule), header-only kernels on raw pointers.
//
//  - flash_forward_mma: tensor cores (mma.sync m16n8k16, fp32 accumulation), ldmatrix from
//    XOR-swizzled shared memory, cp.async loads of the next K tile overlapping softmax and P.V.
//    BQ = 16 * WARPS query rows per block (16 per warp), BK keys per tile.
//  - flash_forward_scalar: one query row per thread, fp32 FMA dot products; the path for
//    platforms without mma.sync (HIP), also compiled and tested on NVIDIA.
// Both: Q/K/V/O in T (bf16 or fp16), scores/m/l/O accumulator fp32, P rounded to T before
// P.V, LSE natural-log fp32, fully masked rows O = 0 and LSE = -inf. Fault variants (FAULTS)
// are compile-time; see online_softmax.cuh. The address faults gqa-mod and index-wrap are
// run-time flags (flash_params::runtime_faults) of the same kernels: one select per block or
// key tile, outside the inner loops, so the fault-free variant serves them.
#include <cstdint>

#include "src/kernels/gpu/online_softmax.cuh"
#include "src/kernels/gpu/platform.cuh"

namespace numprobe::gpu {

template <class T>
struct flash_params {
  const T* q;  // [B*T, Hq, D]
  const T* k;  // [B*S, Hkv, D]
  const T* v;
  T* o;        // [B*T, Hq, D]
  float* lse;  // [B*T, Hq]
  std::int64_t n_q, n_k;  // T, S
  int hq, hkv, group;     // group = Hq / Hkv
  float scale, scale_log2, softcap;
  attention_mask mask;
  std::int64_t window;
  int n_qtiles;
  int batch;
  std::uint32_t runtime_faults;  // k_runtime_faults bits (gpu_api.hpp); 0 for a clean kernel
};

// The KV head query head h reads: h / group, or h % Hkv under gqa-mod.
template <class T>
__device__ __forceinline__ int kv_head_of(const flash_params<T>& p, int h) {
  return (p.runtime_faults & k_fault_gqa_mod) != 0 ? h % p.hkv : h / p.group;
}

// The K/V row key k is read from: k, or k mod 2^15 under index-wrap (a key index kept in 15
// bits; the mask still uses k). A tile of BK keys stays BK contiguous rows when BK divides 2^15.
__device__ __forceinline__ std::int64_t key_row(std::int64_t k, std::uint32_t runtime_faults) {
  return (runtime_faults & k_fault_index_wrap) != 0 ? (k & (k_index_wrap_rows - 1)) : k;
}

// Key-tile range of a block of query rows [q0, q_last], and whether tile k0 needs the
// element mask (some visible row does not see all of it).
struct block_keys {
  std::int64_t lo, hi;        // union of visible keys
  std::int64_t full_lo, full_hi;  // keys visible to every row of the block
};

template <std::uint32_t FAULTS>
__device__ __forceinline__ block_keys block_key_range(attention_mask mask, std::int64_t q0,
                                                      std::int64_t q_last, std::int64_t n_q,
                                                      std::int64_t n_k, std::int64_t window,
                                                      int bk) {
  // lo and hi are non-decreasing in t for every mask, so the first and last rows bound them.
  const key_bounds a = visible_keys<FAULTS>(mask, q0, n_q, n_k, window);
  const key_bounds b = visible_keys<FAULTS>(mask, q_last, n_q, n_k, window);
  block_keys r{a.lo, b.hi, b.lo, a.hi};
  if constexpr ((FAULTS & k_fault_drop_tail_tile) != 0) {
    const std::int64_t full_end = (n_k / bk) * bk;  // a partial last key tile is ignored
    if (r.hi > full_end) r.hi = full_end;
  }
  return r;
}

// Offset (in elements) of (row, col) in a [rows, D] tile whose 16-byte chunks are XOR-swizzled
// by row % 8: eight consecutive rows of one logical chunk land in eight distinct bank groups.
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// Loads rows [0, n_valid) of a [ROWS, D] tile (row stride `stride` elements) into swizzled
// shared memory; rows past n_valid are zero-filled (never read from global memory).
template <class T, int ROWS, int D, int THREADS>
__device__ __forceinline__ void load_tile(T* smem, const T* g, std::int64_t stride, int n_valid,
                                          int tid) {
  constexpr int chunks = D / 8;
  for (int i = tid; i < ROWS * chunks; i += THREADS) {
    const int row = i / chunks, ch = i % chunks;
    const bool valid = row < n_valid;
    const T* src = valid ? g + row * stride + ch * 8 : g;
    platform::copy_16_async(smem + row * D + ((ch ^ (row & 7)) << 3), src, valid);
  }
}

// ------------------------------------------------------------------ tensor-core kernel --------
template <class T, int D, int BK, int WARPS, std::uint32_t FAULTS>
__global__ void __launch_bounds__(WARPS * platform::warp_size, 1)
    flash_forward_mma(const flash_params<T> p) {
  constexpr int BQ = 16 * WARPS;
  constexpr int THREADS = WARPS * platform::warp_size;
  constexpr int KSTEPS = D / 16;  // k-steps of Q.K^T
  constexpr int NT = BK / 8;      // n-tiles of S
  constexpr int DT = D / 8;       // n-tiles of O
  static_assert(D % 64 == 0 && BK % 16 == 0, "swizzle needs D >= 64");
  static_assert(k_index_wrap_rows % BK == 0, "index-wrap keeps a key tile contiguous");
  const float ninf = -__builtin_huge_valf();

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);
  T* sk = sq + BQ * D;
  T* sv = sk + BK * D;

  const int tid = threadIdx.x;
  const int warp = tid / platform::warp_size;
  const int lane = tid % platform::warp_size;
  const int g = lane >> 2, t4 = lane & 3;

  const int qtile = p.n_qtiles - 1 - static_cast<int>(blockIdx.x);  // heaviest causal tiles first
  const int h = blockIdx.y;
  const std::int64_t b = blockIdx.z;
  const int kvh = kv_head_of(p, h);
  const std::int64_t q0 = static_cast<std::int64_t>(qtile) * BQ;
  const std::int64_t q_last = min(q0 + BQ, p.n_q) - 1;
  const std::int64_t q_stride = static_cast<std::int64_t>(p.hq) * D;
  const std::int64_t kv_stride = static_cast<std::int64_t>(p.hkv) * D;
  const T* qg = p.q + ((b * p.n_q + q0) * p.hq + h) * D;
  const T* kg = p.k + (b * p.n_k * p.hkv + kvh) * D;
  const T* vg = p.v + (b * p.n_k * p.hkv + kvh) * D;

  const block_keys bk = block_key_range<FAULTS>(p.mask, q0, q_last, p.n_q, p.n_k,
                                                p.window, BK);
  const std::int64_t tile_begin = bk.lo / BK;
  const std::int64_t tile_end = bk.hi > bk.lo ? (bk.hi + BK - 1) / BK : tile_begin;

  // This thread's two rows (g and g + 8 of its warp's 16) and their visible keys.
  std::int64_t row_t[2];
  key_bounds row_keys[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_t[r] = q0 + warp * 16 + g + 8 * r;
    row_keys[r] = visible_keys<FAULTS>(p.mask, row_t[r], p.n_q, p.n_k, p.window);
    if constexpr ((FAULTS & k_fault_drop_tail_tile) != 0) {
      const std::int64_t full_end = (p.n_k / BK) * BK;
      if (row_keys[r].hi > full_end) row_keys[r].hi = full_end;
    }
  }

  row_softmax<FAULTS> rs[2];
  float l[2] = {0.f, 0.f};
  rs[0].init();
  rs[1].init();
  float acc[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;

  uint32_t qf[KSTEPS][4];
  load_tile<T, BQ, D, THREADS>(sq, qg, q_stride, static_cast<int>(q_last - q0 + 1), tid);
  platform::copy_commit();
  if (tile_begin < tile_end) {
    const std::int64_t k0 = tile_begin * BK;
    load_tile<T, BK, D, THREADS>(sk, kg + key_row(k0, p.runtime_faults) * kv_stride, kv_stride,
                                 static_cast<int>(min(static_cast<std::int64_t>(BK), p.n_k - k0)), tid);
  }
  platform::copy_commit();

  for (std::int64_t j = tile_begin; j < tile_end; ++j) {
    const std::int64_t k0 = j * BK;
    const int k_valid = static_cast<int>(min(static_cast<std::int64_t>(BK), p.n_k - k0));
    load_tile<T, BK, D, THREADS>(sv, vg + key_row(k0, p.runtime_faults) * kv_stride, kv_stride, k_valid, tid);
    platform::copy_commit();
    platform::copy_wait<1>();  // Q (first pass) and K_j have landed; V_j may be in flight
    __syncthreads();
    if (j == tile_begin) {
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk)
        platform::ldmatrix_x4(qf[kk], sq + swz<D>(warp * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8));
    }

    // S = Q K^T (fp32 accumulation)
    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t r[4];
        platform::ldmatrix_x4(
            r, sk + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 16 + ((lane >> 3) & 1) * 8));
        platform::mma_16816<T>(s[2 * np], qf[kk], r[0], r[1]);
        platform::mma_16816<T>(s[2 * np + 1], qf[kk], r[2], r[3]);
      }
    }
    __syncthreads();  // everyone has read K_j: prefetch K_{j+1} during softmax and P.V
    if (j + 1 < tile_end) {
      const std::int64_t k1 = k0 + BK;
      load_tile<T, BK, D, THREADS>(sk, kg + key_row(k1, p.runtime_faults) * kv_stride, kv_stride,
                                   static_cast<int>(min(static_cast<std::int64_t>(BK), p.n_k - k1)), tid);
    }
    platform::copy_commit();

    // Logits, mask, online softmax.
    const bool full_tile = bk.full_lo <= k0 && k0 + BK <= bk.full_hi;
    float alpha[2], m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tmax = ninf;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float x = logit_log2(s[n][2 * r + e], p.scale, p.scale_log2, p.softcap);
          if (!full_tile) {
            const std::int64_t key = k0 + n * 8 + 2 * t4 + e;
            if (key < row_keys[r].lo || key >= row_keys[r].hi) x = ninf;
          }
          s[n][2 * r + e] = x;
          tmax = fmaxf(tmax, x);
        }
      }
      tmax = fmaxf(tmax, platform::shfl_xor(tmax, 1));
      tmax = fmaxf(tmax, platform::shfl_xor(tmax, 2));
      rs[r].update(tmax, alpha[r], m_use[r]);
      float lsum = rowsum_scale<FAULTS>(l[r], alpha[r]);
#pragma unroll
      for (int n = 0; n < NT; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pe = platform::exp2_approx(s[n][2 * r + e] - m_use[r]);
          s[n][2 * r + e] = pe;
          lsum = rowsum_add<FAULTS>(lsum, pe);
        }
      }
      l[r] = lsum;
    }
#pragma unroll
    for (int i = 0; i < DT; ++i) {
      acc[i][0] *= alpha[0];
      acc[i][1] *= alpha[0];
      acc[i][2] *= alpha[1];
      acc[i][3] *= alpha[1];
    }

    platform::copy_wait<1>();  // V_j has landed; K_{j+1} may be in flight
    __syncthreads();
    // O += P V, P rounded to T (the C fragment of two n-tiles is the A fragment of a k-step)
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = platform::pack2<T>(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = platform::pack2<T>(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = platform::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = platform::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < DT / 2; ++dp) {
        uint32_t r[4];
        platform::ldmatrix_x4_trans(
            r, sv + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 16 + (lane >> 4) * 8));
        platform::mma_16816<T>(acc[2 * dp], pa, r[0], r[1]);
        platform::mma_16816<T>(acc[2 * dp + 1], pa, r[2], r[3]);
      }
    }
    if constexpr ((FAULTS & k_fault_acc_bf16) != 0) {
#pragma unroll
      for (int i = 0; i < DT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] = platform::round_bf16(acc[i][e]);
    }
    __syncthreads();  // everyone has read V_j before the next iteration overwrites it
  }
  platform::copy_wait<0>();

  // Epilogue: complete the row sums across the quad, normalise, write O (in T) and LSE.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float lt = l[r];
    if constexpr ((FAULTS & k_fault_rowsum_bf16) != 0) {
      lt = platform::round_bf16(lt + platform::shfl_xor(lt, 1));
      lt = platform::round_bf16(lt + platform::shfl_xor(lt, 2));
    } else {
      lt += platform::shfl_xor(lt, 1);
      lt += platform::shfl_xor(lt, 2);
    }
    const std::int64_t t = row_t[r];
    if (t >= p.n_q) continue;
    bool empty = false;
    if constexpr ((FAULTS & k_fault_no_empty_guard) == 0) empty = !(lt > 0.f);
    const float inv = empty ? 0.f : 1.f / lt;
    T* orow = p.o + ((b * p.n_q + t) * p.hq + h) * D;
#pragma unroll
    for (int i = 0; i < DT; ++i) {
      const uint32_t packed = platform::pack2<T>(acc[i][2 * r] * inv, acc[i][2 * r + 1] * inv);
      *reinterpret_cast<uint32_t*>(orow + i * 8 + 2 * t4) = packed;
    }
    if (t4 == 0) {
      p.lse[(b * p.n_q + t) * p.hq + h] = empty ? ninf : (rs[r].m + log2f(lt)) * k_ln2;
    }
  }
}

// ------------------------------------------------------------------ scalar kernel -------------
// One query row per thread, BQ threads per block; K and V tiles staged in shared memory.
template <class T, int D, int BQ, int BK, std::uint32_t FAULTS>
__global__ void __launch_bounds__(BQ) flash_forward_scalar(const flash_params<T> p) {
  static_assert(k_index_wrap_rows % BK == 0, "index-wrap keeps a key tile contiguous");
  const float ninf = -__builtin_huge_valf();
  __shared__ __align__(16) T sk[BK * D];
  __shared__ __align__(16) T sv[BK * D];

  const int tid = threadIdx.x;
  const int qtile = p.n_qtiles - 1 - static_cast<int>(blockIdx.x);
  const int h = blockIdx.y;
  const std::int64_t b = blockIdx.z;
  const int kvh = kv_head_of(p, h);
  const std::int64_t q0 = static_cast<std::int64_t>(qtile) * BQ;
  const std::int64_t q_last = min(q0 + BQ, p.n_q) - 1;
  const std::int64_t kv_stride = static_cast<std::int64_t>(p.hkv) * D;
  const T* kg = p.k + (b * p.n_k * p.hkv + kvh) * D;
  const T* vg = p.v + (b * p.n_k * p.hkv + kvh) * D;

  const block_keys bk = block_key_range<FAULTS>(p.mask, q0, q_last, p.n_q, p.n_k,
                                                p.window, BK);
  const std::int64_t tile_begin = bk.lo / BK;
  const std::int64_t tile_end = bk.hi > bk.lo ? (bk.hi + BK - 1) / BK : tile_begin;

  const std::int64_t t = q0 + tid;
  const bool active = t < p.n_q;
  key_bounds keys = visible_keys<FAULTS>(p.mask, t, p.n_q, p.n_k, p.window);
  if constexpr ((FAULTS & k_fault_drop_tail_tile) != 0) {
    const std::int64_t full_end = (p.n_k / BK) * BK;
    if (keys.hi > full_end) keys.hi = full_end;
  }
  float q[D], acc[D];
  const T* qrow = p.q + ((b * p.n_q + (active ? t : q0)) * p.hq + h) * D;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = platform::to_float(qrow[d]);
    acc[d] = 0.f;
  }
  row_softmax<FAULTS> rs;
  rs.init();
  float l = 0.f;

  for (std::int64_t j = tile_begin; j < tile_end; ++j) {
    const std::int64_t k0 = j * BK;
    const int k_valid = static_cast<int>(min(static_cast<std::int64_t>(BK), p.n_k - k0));
    __syncthreads();
    const std::int64_t row0 = key_row(k0, p.runtime_faults);
    load_tile<T, BK, D, BQ>(sk, kg + row0 * kv_stride, kv_stride, k_valid, tid);
    load_tile<T, BK, D, BQ>(sv, vg + row0 * kv_stride, kv_stride, k_valid, tid);
    platform::copy_commit();
    platform::copy_wait<0>();
    __syncthreads();

    float s[BK];
    float tmax = ninf;
#pragma unroll 4
    for (int n = 0; n < BK; ++n) {
      float dot = 0.f;
#pragma unroll
      for (int d = 0; d < D; ++d) dot = fmaf(q[d], platform::to_float(sk[swz<D>(n, d)]), dot);
      float x = logit_log2(dot, p.scale, p.scale_log2, p.softcap);
      const std::int64_t key = k0 + n;
      if (key < keys.lo || key >= keys.hi) x = ninf;
      s[n] = x;
      tmax = fmaxf(tmax, x);
    }
    float alpha, m_use;
    rs.update(tmax, alpha, m_use);
    l = rowsum_scale<FAULTS>(l, alpha);
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] *= alpha;
    for (int n = 0; n < BK; ++n) {
      const float pe = platform::exp2_approx(s[n] - m_use);
      l = rowsum_add<FAULTS>(l, pe);
      const float pr = platform::to_float(platform::from_float<T>(pe));  // P in T, as in P.V
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] = fmaf(pr, platform::to_float(sv[swz<D>(n, d)]), acc[d]);
    }
    if constexpr ((FAULTS & k_fault_acc_bf16) != 0) {
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] = platform::round_bf16(acc[d]);
    }
  }
  if (!active) return;
  bool empty = false;
  if constexpr ((FAULTS & k_fault_no_empty_guard) == 0) empty = !(l > 0.f);
  const float inv = empty ? 0.f : 1.f / l;
  T* orow = p.o + ((b * p.n_q + t) * p.hq + h) * D;
#pragma unroll
  for (int d = 0; d < D; ++d) orow[d] = platform::from_float<T>(acc[d] * inv);
  p.lse[(b * p.n_q + t) * p.hq + h] = empty ? ninf : (rs.m + log2f(l)) * k_ln2;
}

}  // namespace numprobe::gpu
