#pragma once
// Quantize and dequantize kernels, one source for CUDA and HIP (platform.cuh). Bit-exact with
// numprobe::formats::quantize on the same float inputs; quantize_codec.cuh says how.
//
// - amax_abs_finite: |x| max over finite elements (atomicMax on the bits of non-negative floats).
// - tensor_scale_kernel: one thread turns the amax into the tensor scale (fp8 per-tensor) or
//   NVFP4's s_t, in double exactly as the reference does.
// - quantize_rows<L, kind, elem>: blocks of 16L consecutive elements of a row (1x128 fp8, int4
//   groups, MX 32, NVFP4 16, and per-tensor fp8 in chunks of 128); L lanes per block, 16
//   elements per lane, block amax by shuffles within the L lanes (L divides the warp width on
//   both vendors); grid-stride over warps.
// - quantize_block2d<Threads>: block_rows x 128 tiles (DeepSeek-V3 weights), one thread block per
//   tile held in registers.
// - quantize_rows_fast / quantize_block2d_smem: the default kernels (fewer instructions per
//   element; 2D tiles held in shared memory); the register kernels above remain for HIP and as
//   the bench's baseline.
// - quantize_block2d_pipe: 2D tiles by persistent blocks that load the next tile with bulk
//   copies while they code the current one (CUDA sm_90); bench variants only: slower than
//   quantize_block2d_smem on the H200 (measurements file, runs 7-8).
// - dequant_int4_f16: packed int4/uint4 -> fp16 by the 0x6400 trick (NUMERICS.md).
// fp8 elements are coded from v * (1 / s) where that provably gives the code of v / s
// (codec::e4m3_quotient), from the round-to-odd quotient elsewhere; no per-element division.
#include <cstdint>

#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/platform.cuh"
#include "src/kernels/gpu/quantize_codec.cuh"

namespace numprobe::gpu::quant {

struct params {
  const float* x = nullptr;
  std::int64_t rows = 0, cols = 0;
  std::uint8_t* codes = nullptr;
  std::int64_t row_bytes = 0;  // packed row stride (4-bit: (cols + 1) / 2, else cols)
  void* scales = nullptr;
  int scale_bytes = 4;
  std::uint8_t* zeros = nullptr;
  const float* tensor_scale = nullptr;  // device scalar (tensor scale, or NVFP4 s_t)
  std::int64_t nb_cols = 0, n_blocks = 0;
  std::int64_t block_rows = 1, block_cols = 128;
  quant_kind kind = quant_kind::m_row_block;
  quant_elem elem = quant_elem::m_e4m3;
  codec::scale_fmt sfmt = codec::scale_fmt::m_f32;
  double amax_floor = 0.0;
  double elem_max = 448.0;
  int emax_elem = 8;
  int mx_rule = 0;
  bool hw = true;
};

__device__ __forceinline__ bool is_finite_f(float v) { return std::fabs(v) <= 3.4028235e38f; }

// Grid-stride over 16-element chunks (four 16-byte loads in flight per thread), a warp-shuffle
// and one shared-memory step per thread block, one atomicMax per block.
__global__ void __launch_bounds__(256) amax_abs_finite(const float* __restrict__ x, std::int64_t n,
                                                       unsigned* __restrict__ out) {
  float m = 0.f;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(x) & 15) == 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t * 16 < n;
       t += stride) {
    const std::int64_t i = t * 16;
    if (aligned && i + 16 <= n) {
      float4 q[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) q[k] = reinterpret_cast<const float4*>(x + i)[k];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float a[4] = {q[k].x, q[k].y, q[k].z, q[k].w};
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (is_finite_f(a[j])) m = fmaxf(m, std::fabs(a[j]));
      }
    } else {
      for (std::int64_t j = i; j < n && j < i + 16; ++j)
        if (is_finite_f(x[j])) m = fmaxf(m, std::fabs(x[j]));
    }
  }
#pragma unroll
  for (int k = 1; k < platform::warp_size; k <<= 1) m = fmaxf(m, platform::shfl_xor(m, k));
  __shared__ float red[256 / 32 + 1];
  const int warps = static_cast<int>(blockDim.x) / platform::warp_size;
  if (threadIdx.x % platform::warp_size == 0) red[threadIdx.x / platform::warp_size] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w) m = fmaxf(m, red[w]);
    atomicMax(out, codec::f2u(m));
  }
}

// Symmetric scale of the reference: max(amax, floor) / max_elem stored in the scale format; an
// all-zero block stores 1.
__device__ __forceinline__ codec::scale_value symmetric_scale(const params& p, float amax) {
  const double a = fmax(static_cast<double>(amax), p.amax_floor);
  return a > 0 ? codec::store_scale(p.sfmt, a / p.elem_max) : codec::store_scale(p.sfmt, 1.0);
}

__device__ __forceinline__ void store_scale_code(const params& p, std::int64_t bi,
                                                 std::uint32_t code) {
  if (p.scale_bytes == 1) static_cast<std::uint8_t*>(p.scales)[bi] = static_cast<std::uint8_t>(code);
  else if (p.scale_bytes == 2) static_cast<std::uint16_t*>(p.scales)[bi] = static_cast<std::uint16_t>(code);
  else static_cast<std::uint32_t*>(p.scales)[bi] = code;
}

// One thread: tensor scale (fp8 per-tensor: the scale; NVFP4: s_t) from the tensor amax.
__global__ void tensor_scale_kernel(params p, const unsigned* amax_bits, float* out) {
  const float amax = codec::u2f(*amax_bits);
  if (p.kind == quant_kind::m_nvfp4) {
    // s_t = amax / (6 * 448) in fp32; an all-zero tensor keeps 1.
    *out = amax > 0 ? static_cast<float>(static_cast<double>(amax) / (6.0 * 448.0)) : 1.0f;
  } else {
    const codec::scale_value s = symmetric_scale(p, amax);
    *out = s.value;
    store_scale_code(p, 0, s.code);
  }
}

// MX shared exponent X of the reference (floor / ceil / rceil), clamped to [-127, 127].
__device__ __forceinline__ int mx_exponent(const params& p, float amax) {
  if (!(amax > 0.f)) return -127;
  const double a = amax;
  const int fl = ilogb(a);
  const bool pow2 = ldexp(1.0, fl) == a;
  int x;
  if (p.mx_rule == 1) {
    x = fl + (pow2 ? 0 : 1) - p.emax_elem;
  } else if (p.mx_rule == 2) {
    const double mx = p.elem_max;
    x = fl - ilogb(mx);
    while (ldexp(mx, x) < a) ++x;
    while (ldexp(mx, x - 1) >= a) --x;
  } else {
    x = fl - p.emax_elem;
  }
  return x < -127 ? -127 : (x > 127 ? 127 : x);
}

__device__ __forceinline__ void store_codes4(const params& p, std::int64_t row, std::int64_t c0,
                                             const std::uint32_t (&c)[4], bool aligned) {
  const bool nib = p.elem != quant_elem::m_e4m3;
  if (nib) {
    std::uint8_t* dst = p.codes + row * p.row_bytes + c0 / 2;
    const std::uint32_t b0 = c[0] | (c[1] << 4), b1 = c[2] | (c[3] << 4);
    if (aligned) {
      *reinterpret_cast<std::uint16_t*>(dst) = static_cast<std::uint16_t>(b0 | (b1 << 8));
    } else {
      // Odd tails pad the high nibble with 0 (NUMERICS.md, packing).
      if (c0 < p.cols) dst[0] = static_cast<std::uint8_t>(c0 + 1 < p.cols ? b0 : c[0]);
      if (c0 + 2 < p.cols) dst[1] = static_cast<std::uint8_t>(c0 + 3 < p.cols ? b1 : c[2]);
    }
  } else {
    std::uint8_t* dst = p.codes + row * p.row_bytes + c0;
    if (aligned) {
      *reinterpret_cast<std::uint32_t*>(dst) = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
    } else {
      for (int j = 0; j < 4; ++j)
        if (c0 + j < p.cols) dst[j] = static_cast<std::uint8_t>(c[j]);
    }
  }
}

// The 16 codes of one lane's run starting at `dst` (the run's first byte: packed nibbles for
// 4-bit elements, bytes for e4m3), of which the first `nvalid` are inside the row: one 8- or
// 16-byte store when the whole run is valid and aligned (`vec`), byte stores otherwise (odd
// tails pad the high nibble with 0: NUMERICS.md, packing).
template <quant_elem E>
__device__ __forceinline__ void store_codes16(std::uint8_t* dst, const std::uint32_t (&c)[16], bool vec,
                                              int nvalid) {
  if constexpr (E != quant_elem::m_e4m3) {
    if (vec) {
      uint2 wv;
      wv.x = c[0] | (c[1] << 4) | (c[2] << 8) | (c[3] << 12) | (c[4] << 16) | (c[5] << 20) |
             (c[6] << 24) | (c[7] << 28);
      wv.y = c[8] | (c[9] << 4) | (c[10] << 8) | (c[11] << 12) | (c[12] << 16) | (c[13] << 20) |
             (c[14] << 24) | (c[15] << 28);
      *reinterpret_cast<uint2*>(dst) = wv;
    } else {
#pragma unroll
      for (int j = 0; j < 16; j += 2)
        if (j < nvalid) dst[j / 2] = static_cast<std::uint8_t>(c[j] | (j + 1 < nvalid ? c[j + 1] << 4 : 0u));
    }
  } else {
    if (vec) {
      uint4 wv;
      wv.x = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
      wv.y = c[4] | (c[5] << 8) | (c[6] << 16) | (c[7] << 24);
      wv.z = c[8] | (c[9] << 8) | (c[10] << 16) | (c[11] << 24);
      wv.w = c[12] | (c[13] << 8) | (c[14] << 16) | (c[15] << 24);
      *reinterpret_cast<uint4*>(dst) = wv;
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j)
        if (j < nvalid) dst[j] = static_cast<std::uint8_t>(c[j]);
    }
  }
}

// Reduction over the L lanes of one block (aligned groups of L within the warp).
template <int L>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int m = 1; m < L; m <<= 1) v = fmaxf(v, platform::shfl_xor(v, m));
  return v;
}
template <int L>
__device__ __forceinline__ float group_min(float v) {
#pragma unroll
  for (int m = 1; m < L; m <<= 1) v = fminf(v, platform::shfl_xor(v, m));
  return v;
}

// Per-block state the element coder needs: the divisor (fp8, int4), its reciprocal for the
// multiply-then-check e4m3 path, or e2m1 decision thresholds (MX e2m1, NVFP4).
struct block_coder {
  float s = 1.f, rs = 0.f;
  bool zero = false;  // NVFP4 block whose e4m3 scale flushed to 0: every code 0
  codec::e2m1_thresholds pts{};
};

// Elements of one block, 4 at a time, by scheme (K) and element (E). NaN inputs: e4m3 NaN with
// the input's sign, 0 for formats without NaN (the reference's convention).
// Fast (the default kernels): the hardware e4m3 conversion without the clamp in front of it
// (cvt ... satfinite already takes +-inf and every |t| > 448 to +-448: PTX ISA, cvt), and NaN
// inputs found from the codes: satfinite gives NaN (low 7 bits 0x7F) only for a NaN input, so
// one test per 4 codes decides whether any element needs its NaN code with the input's sign.
template <quant_kind K, quant_elem E, bool Fast = false>
__device__ __forceinline__ void encode4(const params& p, const block_coder& b, const float (&v)[4],
                                        std::uint32_t (&c)[4]) {
  if constexpr (K == quant_kind::m_nvfp4 || (K == quant_kind::m_mx && E == quant_elem::m_e2m1)) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      c[j] = (b.zero || v[j] != v[j]) ? 0u : codec::encode_e2m1_thresholds(v[j], b.pts);
  } else if constexpr (E == quant_elem::m_e4m3) {
    float t[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) t[j] = codec::e4m3_quotient(v[j], b.s, b.rs);
    bool sw = true;
    if constexpr (platform::has_cvt_e4m3) {
      if (p.hw) {
        sw = false;
        if constexpr (!Fast) {
#pragma unroll
          for (int j = 0; j < 4; ++j) t[j] = fminf(fmaxf(t[j], -1.0e30f), 1.0e30f);
        }
        const std::uint32_t lo = platform::cvt_e4m3x2_satfinite(t[0], t[1]);
        const std::uint32_t hi = platform::cvt_e4m3x2_satfinite(t[2], t[3]);
        c[0] = lo & 0xFF; c[1] = lo >> 8; c[2] = hi & 0xFF; c[3] = hi >> 8;
        if constexpr (Fast) {
          const std::uint32_t w = lo | (hi << 16);
          if ((((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u) == 0u) return;
        }
      }
    }
    if (sw) {
#pragma unroll
      for (int j = 0; j < 4; ++j) c[j] = codec::encode_e4m3_sw(t[j]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (v[j] != v[j]) c[j] = ((codec::f2u(v[j]) >> 24) & 0x80u) | 0x7Fu;
  } else {
    // MX e2m1 is handled by thresholds above; here int4 groups (i4).
#pragma unroll
    for (int j = 0; j < 4; ++j)
      c[j] = v[j] != v[j] ? 0u
                          : codec::encode_i4(b.s == 0.f ? 0.f
                                             : Fast     ? codec::div_round_odd_rcp(v[j], b.s, b.rs)
                                                        : codec::div_round_odd(v[j], b.s));
  }
}

// Symmetric fp32 block scale max(amax, floor) / max_elem: one float division where the
// reference's double quotient rounded to float is that division (amax a float, max_elem a small
// integer: the exact quotient is never within 2^-53 of a float midpoint unless it is one, so the
// double rounding is innocuous); the double path otherwise.
__device__ __forceinline__ codec::scale_value symmetric_scale_fast(const params& p, float amax) {
  if (p.sfmt == codec::scale_fmt::m_f32 && amax > 0.f && static_cast<double>(amax) >= p.amax_floor) {
    const float v = amax / static_cast<float>(p.elem_max);
    return {v, codec::f2u(v)};
  }
  return symmetric_scale(p, amax);
}

// The coder of one block from its amax (finite elements; 0 when none). Stores nothing.
template <quant_kind K, quant_elem E>
__device__ __forceinline__ block_coder make_coder(const params& p, float amax, float st, float r6,
                                                  std::uint32_t& scode) {
  block_coder b;
  if constexpr (K == quant_kind::m_tensor) {
    b.s = st;
    b.rs = codec::block_reciprocal(st);
  } else if constexpr (K == quant_kind::m_mx) {
    // s = 2^X (a float for every X in [-127, 127]); v / s is then exact.
    const int x = mx_exponent(p, amax);
    b.s = static_cast<float>(ldexp(1.0, x));
    b.rs = codec::block_reciprocal(b.s);
    scode = static_cast<std::uint32_t>(x + 127);
    if constexpr (E == quant_elem::m_e2m1)
      b.pts = (x >= -30 && x <= 30) ? codec::make_e2m1_thresholds_f32(b.s, 1.0f)
                                    : codec::make_e2m1_thresholds(b.s, 1.0f);
  } else if constexpr (K == quant_kind::m_nvfp4) {
    // e4m3 block scale of amax / (6 s_t): amax * r6 decides it (e4m3_decided) except near a
    // decision point, where the double quotient of the reference is formed.
    float sb;
    const float q0 = amax * r6;
    if (r6 != 0.f && codec::e4m3_decided(q0)) {
      scode = codec::encode_e4m3_sw(q0);
      sb = codec::decode_e4m3(scode);
    } else {
      const codec::scale_value v = codec::store_scale(
          codec::scale_fmt::m_e4m3, static_cast<double>(amax) / (6.0 * static_cast<double>(st)));
      scode = v.code;
      sb = v.value;
    }
    b.zero = sb == 0.f;
    if (!b.zero)
      b.pts = codec::e2m1_thresholds_f32_ok(st) ? codec::make_e2m1_thresholds_f32(sb, st)
                                                : codec::make_e2m1_thresholds(sb, st);
  } else {  // symmetric row blocks / 2D tiles: fp8 1x128 and 128x128, int4 groups
    const codec::scale_value sv = symmetric_scale_fast(p, amax);
    b.s = sv.value;
    b.rs = codec::block_reciprocal(sv.value);
    scode = sv.code;
  }
  return b;
}

// NVFP4's 1 / (6 s_t) in fp32 (0 when s_t is outside the range where the fp32 paths hold).
__device__ __forceinline__ float nvfp4_r6(float st) {
  return (st >= 0x1.0p-90f && st <= 0x1.0p90f) ? static_cast<float>(1.0 / (6.0 * static_cast<double>(st)))
                                               : 0.f;
}

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

// |v| max over the finite values of one thread (0 when none), as the register kernels compute it,
// in one max per element: fmaxf ignores a NaN operand, so only an infinity changes the result;
// then (rarely) the values are taken again without the infinities.
template <int N>
__device__ __forceinline__ float finite_amax(const float* v) {
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < N; ++j) m = fmaxf(m, std::fabs(v[j]));
  if (!(m <= 3.4028235e38f)) {
    m = 0.f;
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (is_finite_f(v[j])) m = fmaxf(m, std::fabs(v[j]));
  }
  return m;
}

// Max over a thread block of `threads` threads (a warp-shuffle step, then one shared-memory
// step over the warps); every thread gets the result.
template <int Threads>
__device__ __forceinline__ float block_max(float v) {
  constexpr int warps = Threads / platform::warp_size;
#pragma unroll
  for (int m = 1; m < platform::warp_size; m <<= 1) v = fmaxf(v, platform::shfl_xor(v, m));
  __shared__ float red[warps];
  if (threadIdx.x % platform::warp_size == 0) red[threadIdx.x / platform::warp_size] = v;
  __syncthreads();
  float m = red[0];
#pragma unroll
  for (int w = 1; w < warps; ++w) m = fmaxf(m, red[w]);
  return m;
}

// block_rows x 128 tiles (DeepSeek-V3 weights), one thread block per tile, the tile held in
// registers: 32 column quads (coalesced 512-byte row loads) x Threads / 32 row groups, R rows
// per thread (Threads * R = 32 * 128).
// Fast: one max per element for the amax, the Fast e4m3 coding (bench variant 4; the plain form
// is the bench's baseline and the HIP kernel).
template <int Threads, bool Fast = false>
__global__ void __launch_bounds__(Threads) quantize_block2d(params p) {
  constexpr int groups = Threads / 32, R = 128 / groups;
  const int cq = threadIdx.x % 32, rg = threadIdx.x / 32;
  const std::int64_t br = blockIdx.y, bc = blockIdx.x;
  const std::int64_t row0 = br * p.block_rows, c0 = bc * 128 + cq * 4;
  const bool aligned = (p.cols & 3) == 0;
  float v[R][4];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const std::int64_t lr = rg + groups * i;
    const std::int64_t row = row0 + lr;
    const bool row_ok = lr < p.block_rows && row < p.rows;
    const float* src = p.x + row * p.cols + c0;
    if (row_ok && aligned && c0 < p.cols) {
      const float4 q = *reinterpret_cast<const float4*>(src);
      v[i][0] = q.x; v[i][1] = q.y; v[i][2] = q.z; v[i][3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[i][j] = row_ok && c0 + j < p.cols ? src[j] : 0.f;
    }
  }
  if constexpr (Fast) {
    amax = finite_amax<R * 4>(&v[0][0]);
  } else {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (is_finite_f(v[i][j])) amax = fmaxf(amax, std::fabs(v[i][j]));
  }
  amax = block_max<Threads>(amax);
  std::uint32_t scode = 0;
  const block_coder b = make_coder<quant_kind::m_block2d, quant_elem::m_e4m3>(p, amax, 1.f, 0.f, scode);
  if (threadIdx.x == 0) store_scale_code(p, br * p.nb_cols + bc, scode);
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const std::int64_t lr = rg + groups * i;
    const std::int64_t row = row0 + lr;
    if (lr >= p.block_rows || row >= p.rows || c0 >= p.cols) continue;
    std::uint32_t c[4];
    encode4<quant_kind::m_block2d, quant_elem::m_e4m3, Fast>(p, b, v[i], c);
    store_codes4(p, row, c0, c, aligned);
  }
}

// ------------------------------------------------------------------ default kernels (Fast)
// The same blocks and codes as the kernels above with fewer instructions per element: no 64-bit
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

// Dynamic shared memory of quantize_block2d_smem: one 128 x 128 fp32 tile.
inline constexpr int tile_smem_bytes = 128 * 128 * 4;

// block_rows x 128 tiles, one thread block per tile as quantize_block2d, the tile held in shared
// memory instead of registers: each thread copies its own R float4 (32 column quads x
// Threads / 32 row groups; one copy instruction reads 512 contiguous bytes of a row) with
// asynchronous copies, takes the amax from them, and codes them after the block maximum. Few
// registers, so three tiles (192 KiB) are resident per SM at different phases, where the
// register kernel fits two; Fast coding.
template <int Threads, int MinBlocks, bool Whole = true>
__global__ void __launch_bounds__(Threads, MinBlocks) quantize_block2d_smem(params p) {
  constexpr int groups = Threads / 32, R = 128 / groups;
  extern __shared__ float4 tile[];  // [R][Threads]: thread t's float4 i at tile[i * Threads + t]
  const int cq = threadIdx.x % 32, rg = threadIdx.x / 32;
  const std::int64_t br = blockIdx.y, bc = blockIdx.x;
  const std::int64_t row0 = br * p.block_rows, c0 = bc * 128 + cq * 4;
  const bool aligned = (p.cols & 3) == 0;
  // Whole: a full 128 x 128 tile inside the tensor (every tile but the edge ones) takes a path
  // without per-row bounds tests, its row addresses stepped by increments (the profile of the
  // general path showed it issue-bound: SM throughput 71%, DRAM 55%).
  const bool whole = Whole && aligned && p.block_rows == 128 && row0 + 128 <= p.rows && bc * 128 + 128 <= p.cols;
  if (whole) {
    const float* src = p.x + (row0 + rg) * p.cols + c0;
    const std::int64_t step = groups * p.cols;
#pragma unroll
    for (int i = 0; i < R; ++i, src += step) platform::copy_16_async(tile + i * Threads + threadIdx.x, src, true);
  } else {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const std::int64_t lr = rg + groups * i;
      const std::int64_t row = row0 + lr;
      const bool ok = lr < p.block_rows && row < p.rows && c0 < p.cols;
      const float* src = ok ? p.x + row * p.cols + c0 : p.x;
      float4* dst = tile + i * Threads + threadIdx.x;
      if (aligned) {
        platform::copy_16_async(dst, src, ok);
      } else {
        float4 q;
        q.x = ok ? src[0] : 0.f;
        q.y = ok && c0 + 1 < p.cols ? src[1] : 0.f;
        q.z = ok && c0 + 2 < p.cols ? src[2] : 0.f;
        q.w = ok && c0 + 3 < p.cols ? src[3] : 0.f;
        *dst = q;
      }
    }
  }
  platform::copy_commit();
  platform::copy_wait<0>();  // own copies only: no barrier needed for the data
  // |v| max over the finite values (one max per element, see finite_amax).
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const float4 q = tile[i * Threads + threadIdx.x];
    amax = fmaxf(fmaxf(amax, fmaxf(std::fabs(q.x), std::fabs(q.y))), fmaxf(std::fabs(q.z), std::fabs(q.w)));
  }
  if (!(amax <= 3.4028235e38f)) {
    amax = 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float4 q = tile[i * Threads + threadIdx.x];
      const float a[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (is_finite_f(a[j])) amax = fmaxf(amax, std::fabs(a[j]));
    }
  }
  amax = block_max<Threads>(amax);
  std::uint32_t scode = 0;
  const block_coder b = make_coder<quant_kind::m_block2d, quant_elem::m_e4m3>(p, amax, 1.f, 0.f, scode);
  if (threadIdx.x == 0) store_scale_code(p, br * p.nb_cols + bc, scode);
  if (whole) {
    std::uint8_t* dst = p.codes + (row0 + rg) * p.row_bytes + c0;
    const std::int64_t step = groups * p.row_bytes;
#pragma unroll 4
    for (int i = 0; i < R; ++i, dst += step) {
      const float4 q = tile[i * Threads + threadIdx.x];
      const float v[4] = {q.x, q.y, q.z, q.w};
      std::uint32_t c[4];
      encode4<quant_kind::m_block2d, quant_elem::m_e4m3, true>(p, b, v, c);
      *reinterpret_cast<std::uint32_t*>(dst) = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const std::int64_t lr = rg + groups * i;
    const std::int64_t row = row0 + lr;
    if (lr >= p.block_rows || row >= p.rows || c0 >= p.cols) continue;
    const float4 q = tile[i * Threads + threadIdx.x];
    const float v[4] = {q.x, q.y, q.z, q.w};
    std::uint32_t c[4];
    encode4<quant_kind::m_block2d, quant_elem::m_e4m3, true>(p, b, v, c);
    store_codes4(p, row, c0, c, aligned);
  }
}

// Dynamic shared memory of quantize_block2d_pipe: Stages tiles of 128 x 128 fp32.
template <int Stages>
inline constexpr int pipe_smem_bytes = Stages * tile_smem_bytes;

// block_rows x 128 tiles by persistent thread blocks with a ring of Stages tiles in shared memory
// (CUDA sm_90: platform::has_bulk_copy; the launcher also needs cols % 4 == 0). One producer
// warp (the last) fills the ring with one bulk copy per tile row (cp.async.bulk, completing on
// the stage's `full` barrier) as soon as the consumers have released a stage (`empty`), so tile
// loads stay in flight while Consumers threads code the tiles before them. Tiles are taken in
// row-major order t = blockIdx.x + k * gridDim.x. Each consumer copies its R float4 to registers
// and releases the stage at once, so even one stage overlaps the next tile's load with the
// coding of the current one (Stages 1 and MinBlocks 2: two blocks of 512 + 32 threads per SM).
// Columns past the row end and rows past the last row are not copied (their shared memory holds
// older data) and are masked. Fast coding, as quantize_block2d_smem.
template <int Consumers, int Stages, int MinBlocks, bool EvictFirst = false>
__global__ void __launch_bounds__(Consumers + 32, MinBlocks) quantize_block2d_pipe(params p) {
  constexpr int groups = Consumers / 32, R = 128 / groups;
  extern __shared__ float4 ring[];  // [Stages][128 rows][32 column quads]
  __shared__ std::uint64_t full[Stages], empty[Stages];
  __shared__ float red[2][groups];
  const std::int64_t tiles = p.nb_cols * ((p.rows + p.block_rows - 1) / p.block_rows);
  if (threadIdx.x == 0) {
    for (int s = 0; s < Stages; ++s) {
      platform::mbar_init(&full[s], 1);
      platform::mbar_init(&empty[s], groups);
    }
    platform::mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x >= Consumers) {  // producer warp
    const int lane = threadIdx.x - Consumers;
    int k = 0;
    for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x, ++k) {
      const int s = k % Stages;
      if (k >= Stages) platform::mbar_wait(&empty[s], static_cast<unsigned>((k / Stages - 1) & 1));
      const std::int64_t br = t / p.nb_cols, bc = t - br * p.nb_cols;
      const std::int64_t row0 = br * p.block_rows, c0 = bc * 128;
      const int nr = static_cast<int>(p.block_rows < p.rows - row0 ? p.block_rows : p.rows - row0);
      const int nc = static_cast<int>(128 < p.cols - c0 ? 128 : p.cols - c0);
      const unsigned row_bytes = static_cast<unsigned>(nc) * 4u;
      if (lane == 0) platform::mbar_arrive_expect_tx(&full[s], static_cast<unsigned>(nr) * row_bytes);
      platform::sync_warp();
      float4* stage = ring + s * 128 * 32;
      for (int r = lane; r < nr; r += 32)
        platform::bulk_copy_g2s<EvictFirst>(stage + r * 32, p.x + (row0 + r) * p.cols + c0, row_bytes, &full[s]);
    }
    return;
  }
  const int cq = threadIdx.x % 32, rg = threadIdx.x / 32;
  const bool aligned = (p.cols & 3) == 0;
  int k = 0;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x, ++k) {
    const int s = k % Stages;
    const std::int64_t br = t / p.nb_cols, bc = t - br * p.nb_cols;
    const std::int64_t row0 = br * p.block_rows, c0 = bc * 128 + cq * 4;
    const std::int64_t nr = p.block_rows < p.rows - row0 ? p.block_rows : p.rows - row0;
    const bool col_ok = c0 < p.cols;
    const float4* stage = ring + s * 128 * 32;
    platform::mbar_wait(&full[s], static_cast<unsigned>((k / Stages) & 1));
    float amax = 0.f;
    float4 v[R];
#pragma unroll
    for (int i = 0; i < R; ++i) v[i] = stage[(rg + groups * i) * 32 + cq];
    platform::sync_warp();
    if (cq == 0) platform::mbar_arrive(&empty[s]);
    // |v| max over the finite values (one max per element, see finite_amax); masked entries 0.
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float4 q = v[i];
      const bool ok = col_ok && rg + groups * i < nr;
      const float m = fmaxf(fmaxf(std::fabs(q.x), std::fabs(q.y)), fmaxf(std::fabs(q.z), std::fabs(q.w)));
      amax = fmaxf(amax, ok ? m : 0.f);
    }
    if (!(amax <= 3.4028235e38f)) {
      amax = 0.f;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const float4 q = v[i];
        if (!(col_ok && rg + groups * i < nr)) continue;
        const float a[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (is_finite_f(a[j])) amax = fmaxf(amax, std::fabs(a[j]));
      }
    }
    // Max over the consumers: warp shuffles, then one named barrier; red[] alternates between
    // tiles so that a fast warp's next write cannot meet a slow warp's read.
#pragma unroll
    for (int m = 1; m < platform::warp_size; m <<= 1) amax = fmaxf(amax, platform::shfl_xor(amax, m));
    if (cq == 0) red[k & 1][rg] = amax;
    platform::named_barrier_sync(1, Consumers);
    amax = red[k & 1][0];
#pragma unroll
    for (int w = 1; w < groups; ++w) amax = fmaxf(amax, red[k & 1][w]);
    std::uint32_t scode = 0;
    const block_coder b = make_coder<quant_kind::m_block2d, quant_elem::m_e4m3>(p, amax, 1.f, 0.f, scode);
    if (threadIdx.x == 0) store_scale_code(p, t, scode);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int lr = rg + groups * i;
      if (!col_ok || lr >= nr) continue;
      const float4 q = v[i];
      const float in4[4] = {q.x, q.y, q.z, q.w};
      std::uint32_t c[4];
      encode4<quant_kind::m_block2d, quant_elem::m_e4m3, true>(p, b, in4, c);
      store_codes4(p, row0 + lr, c0, c, aligned);
    }
  }
}

// Packed int4 (i4: two's complement; u4 with zero points) -> fp16 = (q - z) * s, one byte (two
// elements) per thread: 0x6400 | n is 1024 + n; the high nibble gives 1024 + 16 n, and
// fma(h, 1/16, -64) = n. Both exact in fp16; one fp16 multiply by the scale rounds (RNE).
__global__ void dequant_int4_f16(const std::uint8_t* __restrict__ codes, std::int64_t rows,
                                 std::int64_t cols, std::int64_t row_bytes,
                                 const std::uint16_t* __restrict__ scales,
                                 const std::uint8_t* __restrict__ zeros, std::int64_t nb_cols,
                                 std::int64_t group, std::uint16_t* __restrict__ out) {
  const std::int64_t n = rows * row_bytes;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / row_bytes, c = (i % row_bytes) * 2;
    const std::int64_t bi = row * nb_cols + c / group;
    std::uint32_t b = codes[i];
    int zoff;
    if (zeros) {
      zoff = zeros[bi];
    } else {
      b ^= 0x88u;  // two's complement nibble n -> n + 8 (unsigned), zero point 8
      zoff = 8;
    }
    const __half lo = __ushort_as_half(static_cast<unsigned short>(0x6400u | (b & 0x0Fu)));
    const __half hi = __ushort_as_half(static_cast<unsigned short>(0x6400u | (b & 0xF0u)));
    const __half ql = __hsub(lo, __float2half(1024.f + static_cast<float>(zoff)));
    const __half qh = __hfma(hi, __float2half(0.0625f), __float2half(-64.f - static_cast<float>(zoff)));
    const __half s = __ushort_as_half(scales[bi]);
    out[row * cols + c] = __half_as_ushort(__hmul(ql, s));
    if (c + 1 < cols) out[row * cols + c + 1] = __half_as_ushort(__hmul(qh, s));
  }
}

}  // namespace numprobe::gpu::quant
