#pragma once
// Row-block quantize kernels (CUDA and HIP, platform.cuh): blocks of 16L consecutive elements of
// a row (1x128 fp8, int4 groups, MX 32, NVFP4 16, and per-tensor fp8 in chunks of 128).
// - quantize_rows<L, kind, elem>: L lanes per block, 16 elements per lane, block amax by shuffles
//   within the L lanes (L divides the warp width on both vendors); grid-stride over warps. The
//   HIP kernel, and the CUDA bench's baseline.
// - quantize_rows_fast<L, kind, elem, MinBlocks>: the CUDA kernel (fewer instructions per
//   element; the section comment below says which).
#include <cstdint>

#include "src/kernels/gpu/quantize_block_coder.cuh"

namespace numprobe::gpu::quant {

// Blocks of 16 L elements along a row: L lanes per block, 16 consecutive elements per lane
// (four 16-byte loads; one 8- or 16-byte store of codes), the block amax by shuffles within the
// L lanes. Grid-stride over warps: a warp covers warp_size / L blocks per step, so every lane of
// a warp takes the same number of steps and the shuffles always see the full warp.
template <int L, quant_kind K, quant_elem E>
__global__ void __launch_bounds__(256, 4) quantize_rows(params p) {
  constexpr int V = 16;
  constexpr int per_warp = platform::warp_size / L;
  const int lane = threadIdx.x % L;
  const int warp_lane = threadIdx.x % platform::warp_size;
  const std::int64_t warps_total = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / platform::warp_size);
  const std::int64_t warp0 = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / platform::warp_size) +
                             threadIdx.x / platform::warp_size;
  const bool vec_load = (p.cols & 3) == 0;
  float st = 1.f, r6 = 0.f;
  if constexpr (K == quant_kind::m_tensor || K == quant_kind::m_nvfp4) st = *p.tensor_scale;
  if constexpr (K == quant_kind::m_nvfp4) r6 = nvfp4_r6(st);
  block_coder tensor_coder;
  std::uint32_t unused = 0;
  if constexpr (K == quant_kind::m_tensor) tensor_coder = make_coder<K, E>(p, 0.f, st, 0.f, unused);

  for (std::int64_t w = warp0; w * per_warp < p.n_blocks; w += warps_total) {
    const std::int64_t bi = w * per_warp + warp_lane / L;
    const bool active = bi < p.n_blocks;  // inactive lanes still take part in the shuffles
    const std::int64_t row = active ? bi / p.nb_cols : 0;
    const std::int64_t c0 = active ? (bi % p.nb_cols) * p.block_cols + lane * V : 0;
    const bool vec_store = (p.cols & 15) == 0 && c0 + V <= p.cols;
    float v[V];
    const float* src = p.x + row * p.cols + c0;
#pragma unroll
    for (int k = 0; k < V / 4; ++k) {
      if (active && vec_load && c0 + 4 * k < p.cols) {
        const float4 q = *reinterpret_cast<const float4*>(src + 4 * k);
        v[4 * k] = q.x; v[4 * k + 1] = q.y; v[4 * k + 2] = q.z; v[4 * k + 3] = q.w;
      } else {
#pragma unroll
        for (int j = 4 * k; j < 4 * k + 4; ++j) v[j] = active && c0 + j < p.cols ? src[j] : 0.f;
      }
    }
    std::uint32_t c[V];
    if constexpr (K == quant_kind::m_asym) {
      // Elements past the row end are 0 (partial blocks are zero-padded) and do not count.
      float mn = 3.4028235e38f, mx = -3.4028235e38f;
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (active && c0 + j < p.cols && is_finite_f(v[j])) {
          mn = fminf(mn, v[j]);
          mx = fmaxf(mx, v[j]);
        }
      mn = group_min<L>(mn);
      mx = group_max<L>(mx);
      if (active) {
        const bool any = mn <= mx;
        const double lo = any ? mn : 0.0, hi = any ? mx : 0.0;
        const double range = fmax(hi - lo, 1e-5);
        const codec::scale_value s = codec::store_scale(p.sfmt, range / 15.0);
        double z = 0.0;
        if (s.value != 0.f) z = fmin(fmax(-rint(lo / static_cast<double>(s.value)), 0.0), 15.0);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float r = std::rint(s.value == 0.f ? 0.f : codec::div_round_odd(v[j], s.value));
          const float q = fminf(fmaxf(r + static_cast<float>(z), 0.f), 15.f);
          c[j] = v[j] != v[j] ? 0u : static_cast<std::uint32_t>(q);
        }
        if (lane == 0) {
          store_scale_code(p, bi, s.code);
          p.zeros[bi] = static_cast<std::uint8_t>(z);
        }
      }
    } else {
      block_coder b;
      if constexpr (K == quant_kind::m_tensor) {
        b = tensor_coder;
      } else {
        // Padding past the row end is 0 and cannot raise the amax.
        float amax = 0.f;
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (is_finite_f(v[j])) amax = fmaxf(amax, std::fabs(v[j]));
        amax = group_max<L>(amax);
        std::uint32_t scode = 0;
        b = make_coder<K, E>(p, amax, st, r6, scode);
        if (active && lane == 0) store_scale_code(p, bi, scode);
      }
      if (active) {
#pragma unroll
        for (int k = 0; k < V / 4; ++k) {
          const float in4[4] = {v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]};
          std::uint32_t out4[4];
          encode4<K, E>(p, b, in4, out4);
#pragma unroll
          for (int j = 0; j < 4; ++j) c[4 * k + j] = out4[j];
        }
      }
    }
    if (!active || c0 >= p.cols) continue;
    const std::int64_t left = p.cols - c0;
    store_codes16<E>(p.codes + row * p.row_bytes + (E != quant_elem::m_e4m3 ? c0 / 2 : c0), c, vec_store,
                     static_cast<int>(left < V ? left : V));
  }
}

// ------------------------------------------------------------------ CUDA kernel (Fast)
// The same blocks and codes as quantize_rows with fewer instructions per element: no 64-bit
// division per step (place_lane), the e2m1 thresholds of every block scale from a table, one max
// per element for the amax, the e4m3 conversion without a clamp and with NaN inputs found from
// the codes, the int4 quotient from the block reciprocal. The 1 GiB kernels are bound by issue
// and latency, not by bytes in flight (measurements: a cp.async ring of 3-6 steps was slower).

// e2m1 decision thresholds of every possible block scale, built once per thread block in shared
// memory (the per-block construction costs about 60 instructions): NVFP4 indexed by the e4m3
// scale code (0..127; s_t is one value per tensor), MX e2m1 by X + 127. Each entry is exactly
// what make_coder builds for that scale, so the codes do not change.
template <quant_kind K, quant_elem E>
inline constexpr int e2m1_table_size =
    K == quant_kind::m_nvfp4 ? 128 : (K == quant_kind::m_mx && E == quant_elem::m_e2m1 ? 255 : 0);

template <quant_kind K, quant_elem E>
__device__ __forceinline__ void build_e2m1_table(float4 (*tab)[2], float st) {
  constexpr int N = e2m1_table_size<K, E>;
  for (int i = threadIdx.x; i < N; i += blockDim.x) {
    codec::e2m1_thresholds t{};
    if constexpr (K == quant_kind::m_nvfp4) {
      const float sb = codec::decode_e4m3(static_cast<std::uint32_t>(i));
      if (sb > 0.f)  // code 0 is the all-zero block (no thresholds), 127 NaN (never stored)
        t = codec::e2m1_thresholds_f32_ok(st) ? codec::make_e2m1_thresholds_f32(sb, st)
                                              : codec::make_e2m1_thresholds(sb, st);
    } else {
      const int x = i - 127;
      const float s = static_cast<float>(ldexp(1.0, x));
      t = (x >= -30 && x <= 30) ? codec::make_e2m1_thresholds_f32(s, 1.0f)
                                : codec::make_e2m1_thresholds(s, 1.0f);
    }
    tab[i][0] = make_float4(t.thr[0], t.thr[1], t.thr[2], t.thr[3]);
    tab[i][1] = make_float4(t.thr[4], t.thr[5], t.thr[6], 0.f);
  }
}

// make_coder with the thresholds taken from the table (NVFP4, MX e2m1); the other schemes as
// make_coder. The scale code is computed by the same operations.
template <quant_kind K, quant_elem E>
__device__ __forceinline__ block_coder make_coder_tab(const params& p, float amax, float st, float r6,
                                                      std::uint32_t& scode, const float4 (*tab)[2]) {
  if constexpr (K == quant_kind::m_nvfp4 || (K == quant_kind::m_mx && E == quant_elem::m_e2m1)) {
    block_coder b;
    int idx;
    if constexpr (K == quant_kind::m_nvfp4) {
      const float q0 = amax * r6;
      if (r6 != 0.f && codec::e4m3_decided(q0)) {
        scode = codec::encode_e4m3_sw(q0);
      } else {
        scode = codec::store_scale(codec::scale_fmt::m_e4m3,
                                   static_cast<double>(amax) / (6.0 * static_cast<double>(st)))
                    .code;
      }
      b.zero = (scode & 0x7Fu) == 0;  // decode_e4m3(scode) == 0
      idx = static_cast<int>(scode & 0x7Fu);
    } else {
      const int x = mx_exponent(p, amax);
      scode = static_cast<std::uint32_t>(x + 127);
      idx = x + 127;
    }
    const float4 a = tab[idx][0], c = tab[idx][1];
    b.pts.thr[0] = a.x; b.pts.thr[1] = a.y; b.pts.thr[2] = a.z; b.pts.thr[3] = a.w;
    b.pts.thr[4] = c.x; b.pts.thr[5] = c.y; b.pts.thr[6] = c.z;
    return b;
  } else {
    return make_coder<K, E>(p, amax, st, r6, scode);
  }
}

// Where one lane's 16 elements are: element offset e0 in x, byte offset of its codes, how many
// of the 16 lie inside the row (0 for a lane past the last block).
struct lane_place {
  std::int64_t bi = 0, e0 = 0, code_off = 0;
  int nvalid = 0;
  bool active = false;
};

// One lane's block share after its 16 values are in registers: block amax over the L lanes,
// scale, codes, stores. The operations of quantize_rows' loop body (Fast: the int4 quotients by
// codec::div_round_odd_rcp, bit-identical to div_round_odd), with the element range given by
// `g` (flat or row/column addressing).
template <int L, quant_kind K, quant_elem E, bool Fast>
__device__ __forceinline__ void code_lane(const params& p, const float (&v)[16], const lane_place& g,
                                          int lane, float st, float r6, const block_coder& tensor_coder,
                                          const float4 (*tab)[2]) {
  constexpr int V = 16;
  std::uint32_t c[V];
  if constexpr (K == quant_kind::m_asym) {
    float mn = 3.4028235e38f, mx = -3.4028235e38f;
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (j < g.nvalid && is_finite_f(v[j])) {
        mn = fminf(mn, v[j]);
        mx = fmaxf(mx, v[j]);
      }
    mn = group_min<L>(mn);
    mx = group_max<L>(mx);
    if (g.active) {
      const bool any = mn <= mx;
      const double lo = any ? mn : 0.0, hi = any ? mx : 0.0;
      const double range = fmax(hi - lo, 1e-5);
      const codec::scale_value s = codec::store_scale(p.sfmt, range / 15.0);
      double z = 0.0;
      if (s.value != 0.f) z = fmin(fmax(-rint(lo / static_cast<double>(s.value)), 0.0), 15.0);
      const float rs = Fast ? codec::block_reciprocal(s.value) : 0.f;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float r = std::rint(s.value == 0.f ? 0.f
                                  : Fast       ? codec::div_round_odd_rcp(v[j], s.value, rs)
                                               : codec::div_round_odd(v[j], s.value));
        const float q = fminf(fmaxf(r + static_cast<float>(z), 0.f), 15.f);
        c[j] = v[j] != v[j] ? 0u : static_cast<std::uint32_t>(q);
      }
      if (lane == 0) {
        store_scale_code(p, g.bi, s.code);
        p.zeros[g.bi] = static_cast<std::uint8_t>(z);
      }
    }
  } else {
    block_coder b;
    if constexpr (K == quant_kind::m_tensor) {
      b = tensor_coder;
    } else {
      // Values past the row end are 0 and cannot raise the amax.
      const float amax = group_max<L>(finite_amax<V>(v));
      std::uint32_t scode = 0;
      b = make_coder_tab<K, E>(p, amax, st, r6, scode, tab);
      if (g.active && lane == 0) store_scale_code(p, g.bi, scode);
    }
    if (g.active) {
#pragma unroll
      for (int k = 0; k < V / 4; ++k) {
        const float in4[4] = {v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]};
        std::uint32_t out4[4];
        encode4<K, E, Fast>(p, b, in4, out4);
#pragma unroll
        for (int j = 0; j < 4; ++j) c[4 * k + j] = out4[j];
      }
    }
  }
  if (!g.active || g.nvalid <= 0) return;
  const bool vec_store = (p.cols & 15) == 0 && g.nvalid == V;
  store_codes16<E>(p.codes + g.code_off, c, vec_store, g.nvalid);
}

// Where lane `warp_lane` of warp step w of a row kernel works (16 L elements per block, L lanes
// per block, warp_size / L blocks per step). Flat layout (cols a multiple of the block length):
// block bi starts at element bi * block_cols, so no division; otherwise row and column of the
// block by one division (32-bit when the block count allows).
template <int L>
__device__ __forceinline__ lane_place place_lane(const params& p, std::int64_t w, int warp_lane, bool flat,
                                                 bool div32, bool fp8) {
  constexpr int V = 16, per_warp = platform::warp_size / L;
  const int lane = warp_lane % L;
  lane_place g;
  g.bi = w * per_warp + warp_lane / L;
  g.active = g.bi < p.n_blocks;
  if (flat) {
    g.e0 = g.bi * p.block_cols + lane * V;
    g.code_off = fp8 ? g.e0 : g.e0 / 2;
    g.nvalid = g.active ? V : 0;
  } else if (g.active) {
    const std::int64_t row = div32 ? static_cast<std::int64_t>(static_cast<std::uint32_t>(g.bi) /
                                                                static_cast<std::uint32_t>(p.nb_cols))
                                   : g.bi / p.nb_cols;
    const std::int64_t c0 = (g.bi - row * p.nb_cols) * p.block_cols + lane * V;
    g.e0 = row * p.cols + c0;
    g.code_off = row * p.row_bytes + (fp8 ? c0 : c0 / 2);
    const std::int64_t left = p.cols - c0;
    g.nvalid = left <= 0 ? 0 : (left >= V ? V : static_cast<int>(left));
  }
  return g;
}

// Per-kernel constants of the row kernels: the tensor scale (fp8 per-tensor, NVFP4 s_t), NVFP4's
// 1 / (6 s_t), the per-tensor coder.
template <quant_kind K, quant_elem E>
struct row_consts {
  float st = 1.f, r6 = 0.f;
  block_coder tensor_coder;
  __device__ __forceinline__ explicit row_consts(const params& p) {
    if constexpr (K == quant_kind::m_tensor || K == quant_kind::m_nvfp4) st = *p.tensor_scale;
    if constexpr (K == quant_kind::m_nvfp4) r6 = nvfp4_r6(st);
    std::uint32_t unused = 0;
    if constexpr (K == quant_kind::m_tensor) tensor_coder = make_coder<K, E>(p, 0.f, st, 0.f, unused);
  }
};

// The default row kernel: quantize_rows' geometry and register loads (four 16-byte loads per
// lane), with the division-free addressing of place_lane, the e2m1 threshold table, one max per
// element for the amax and the Fast e4m3 coding (code_lane).
template <int L, quant_kind K, quant_elem E, int MinBlocks>
__global__ void __launch_bounds__(256, MinBlocks) quantize_rows_fast(params p) {
  constexpr int V = 16, W = platform::warp_size;
  constexpr int per_warp = W / L;
  constexpr int TAB = e2m1_table_size<K, E>;
  __shared__ float4 tab[TAB > 0 ? TAB : 1][2];
  const int warp_lane = threadIdx.x % W;
  const std::int64_t warps_total = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / W);
  const std::int64_t warp0 = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / W) + threadIdx.x / W;
  const bool flat = p.cols % p.block_cols == 0;
  const bool vec_load = (p.cols & 3) == 0;
  const bool div32 = p.n_blocks <= 0x7FFFFFFF;
  const row_consts<K, E> k(p);
  if constexpr (TAB > 0) {
    build_e2m1_table<K, E>(tab, k.st);
    __syncthreads();
  }
  for (std::int64_t w = warp0; w * per_warp < p.n_blocks; w += warps_total) {
    const lane_place g = place_lane<L>(p, w, warp_lane, flat, div32, E == quant_elem::m_e4m3);
    const float* src = p.x + g.e0;
    float v[V];
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      if (vec_load && 4 * q < g.nvalid) {
        const float4 f = *reinterpret_cast<const float4*>(src + 4 * q);
        v[4 * q] = f.x; v[4 * q + 1] = f.y; v[4 * q + 2] = f.z; v[4 * q + 3] = f.w;
      } else {
#pragma unroll
        for (int j = 4 * q; j < 4 * q + 4; ++j) v[j] = j < g.nvalid ? src[j] : 0.f;
      }
    }
    code_lane<L, K, E, true>(p, v, g, warp_lane % L, k.st, k.r6, k.tensor_coder, tab);
  }
}

}  // namespace numprobe::gpu::quant
