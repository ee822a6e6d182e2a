#pragma once
// Quantize and dequantize kernels, one source for CUDA and HIP (platform.cuh). Bit-exact with
// numprobe::formats::quantize on the same float inputs; quantize_codec.cuh says how.
//
// - amax_abs_finite: |x| max over finite elements (atomicMax on the bits of non-negative floats).
// - tensor_scale_kernel: one thread turns the amax into the tensor scale (fp8 per-tensor) or
//   NVFP4's s_t, in double exactly as the reference does.
// - quantize_rows<L>: blocks of 4L consecutive elements of a row (1x128 fp8, int4 groups, MX 32,
//   NVFP4 16); L lanes per block, 4 elements per lane, block amax by shuffles within the L lanes
//   (L divides the warp width on both vendors).
// - quantize_block2d: block_rows x 128 tiles (DeepSeek-V3 weights), one 256-thread block per tile,
//   the tile held in registers, amax through shared memory.
// - dequant_int4_f16: packed int4/uint4 -> fp16 by the 0x6400 trick (NUMERICS.md).
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

__global__ void amax_abs_finite(const float* __restrict__ x, std::int64_t n,
                                unsigned* __restrict__ out) {
  float m = 0.f;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x * 4;
  for (std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
       i < n; i += stride) {
    if (i + 3 < n && (reinterpret_cast<std::uintptr_t>(x + i) & 15) == 0) {
      const float4 v = *reinterpret_cast<const float4*>(x + i);
      const float a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (is_finite_f(a[j])) m = fmaxf(m, std::fabs(a[j]));
    } else {
      for (std::int64_t j = i; j < n && j < i + 4; ++j)
        if (is_finite_f(x[j])) m = fmaxf(m, std::fabs(x[j]));
    }
  }
  __shared__ float red[1024];
  red[threadIdx.x] = m;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicMax(out, codec::f2u(red[0]));
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

// Elements t = v / s (s = 0 codes 0) for e4m3 / e2m1 / int4, 4 at a time. NaN inputs: e4m3 NaN
// with the input's sign, 0 for formats without NaN (the reference's convention).
__device__ __forceinline__ void encode4_div(const params& p, const float (&v)[4], float s,
                                            std::uint32_t (&c)[4]) {
  // The IEEE quotient + fma remainder (div_round_odd). The reciprocal variant
  // (div_round_odd_rcp, same results) measured slower on the H200 (0.96 vs 0.71 ms per GiB).
  float t[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) t[j] = s == 0.f ? 0.f : codec::div_round_odd(v[j], s);
  if (p.elem == quant_elem::m_e4m3) {
    if constexpr (platform::has_cvt_e4m3) {
      if (p.hw) {
#pragma unroll
        for (int j = 0; j < 4; ++j) t[j] = fminf(fmaxf(t[j], -1.0e30f), 1.0e30f);
        const std::uint32_t a = platform::cvt_e4m3x2_satfinite(t[0], t[1]);
        const std::uint32_t b = platform::cvt_e4m3x2_satfinite(t[2], t[3]);
        c[0] = a & 0xFF; c[1] = a >> 8; c[2] = b & 0xFF; c[3] = b >> 8;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) c[j] = codec::encode_e4m3_sw(t[j]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) c[j] = codec::encode_e4m3_sw(t[j]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (v[j] != v[j]) c[j] = ((codec::f2u(v[j]) >> 24) & 0x80u) | 0x7Fu;
  } else if (p.elem == quant_elem::m_e2m1) {
#pragma unroll
    for (int j = 0; j < 4; ++j) c[j] = v[j] != v[j] ? 0u : codec::encode_e2m1_sw(t[j]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) c[j] = v[j] != v[j] ? 0u : codec::encode_i4(t[j]);
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

// Blocks of 16 L elements along a row: L lanes per block, 16 consecutive elements per lane
// (four 16-byte loads; one 8- or 16-byte store of codes), so a block's scale is computed once per
// lane for 16 elements.
template <int L>
__global__ void __launch_bounds__(256) quantize_rows(params p) {
  constexpr int V = 16;
  constexpr int groups = 256 / L;
  const int lane = threadIdx.x % L;
  const std::int64_t bi = static_cast<std::int64_t>(blockIdx.x) * groups + threadIdx.x / L;
  const bool active = bi < p.n_blocks;  // inactive lanes still take part in the shuffles
  const std::int64_t row = active ? bi / p.nb_cols : 0;
  const std::int64_t c0 = active ? (bi % p.nb_cols) * p.block_cols + lane * V : 0;
  const bool vec_load = (p.cols & 3) == 0;
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
  // Elements past the row end are 0 (partial blocks are zero-padded: padding cannot raise amax).
  float amax = 0.f, mn = 3.4028235e38f, mx = -3.4028235e38f;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const bool in = active && c0 + j < p.cols;
    if (in && is_finite_f(v[j])) {
      amax = fmaxf(amax, std::fabs(v[j]));
      mn = fminf(mn, v[j]);
      mx = fmaxf(mx, v[j]);
    }
  }
  std::uint32_t c[V];
  if (p.kind == quant_kind::m_asym) {
    mn = group_min<L>(mn);
    mx = group_max<L>(mx);
    if (!active) return;
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
  } else {
    if (p.kind != quant_kind::m_tensor) amax = group_max<L>(amax);
    if (!active) return;
    float s = 1.f;
    std::uint32_t scode = 0;
    bool nvfp4_zero = false;
    bool thresholds = false;
    codec::e2m1_thresholds pts{};
    if (p.kind == quant_kind::m_tensor) {
      s = *p.tensor_scale;
    } else if (p.kind == quant_kind::m_mx) {
      // s = 2^X (a float for every X in [-127, 127]); v / s is then exact, so the element
      // coding below is the reference's. (Dividing keeps v, and a NaN's sign, untouched.)
      const int x = mx_exponent(p, amax);
      s = static_cast<float>(ldexp(1.0, x));
      scode = static_cast<std::uint32_t>(x + 127);
      if (p.elem == quant_elem::m_e2m1) {  // e2m1: exact thresholds m_k 2^X
        pts = codec::make_e2m1_thresholds(s, 1.0f);
        thresholds = true;
      }
    } else if (p.kind == quant_kind::m_nvfp4) {
      const float st = *p.tensor_scale;
      const double ideal = static_cast<double>(amax) / (6.0 * static_cast<double>(st));
      const codec::scale_value sb = codec::store_scale(codec::scale_fmt::m_e4m3, ideal);
      scode = sb.code;
      nvfp4_zero = sb.value == 0.f;
      if (!nvfp4_zero) pts = codec::make_e2m1_thresholds(sb.value, st);
      thresholds = true;
    } else {  // symmetric row blocks: 1x128 fp8, int4 groups
      const codec::scale_value sv = symmetric_scale(p, amax);
      s = sv.value;
      scode = sv.code;
    }
    if (thresholds) {
#pragma unroll
      for (int j = 0; j < V; ++j)
        c[j] = (nvfp4_zero || v[j] != v[j]) ? 0u : codec::encode_e2m1_thresholds(v[j], pts);
    } else {
#pragma unroll
      for (int k = 0; k < V / 4; ++k) {
        const float in4[4] = {v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]};
        std::uint32_t out4[4];
        encode4_div(p, in4, s, out4);
#pragma unroll
        for (int j = 0; j < 4; ++j) c[4 * k + j] = out4[j];
      }
    }
    if (lane == 0 && p.kind != quant_kind::m_tensor) store_scale_code(p, bi, scode);
  }
  if (c0 >= p.cols) return;
  if (p.elem != quant_elem::m_e4m3) {
    std::uint8_t* dst = p.codes + row * p.row_bytes + c0 / 2;
    if (vec_store) {
      uint2 w;
      w.x = c[0] | (c[1] << 4) | (c[2] << 8) | (c[3] << 12) | (c[4] << 16) | (c[5] << 20) |
            (c[6] << 24) | (c[7] << 28);
      w.y = c[8] | (c[9] << 4) | (c[10] << 8) | (c[11] << 12) | (c[12] << 16) | (c[13] << 20) |
            (c[14] << 24) | (c[15] << 28);
      *reinterpret_cast<uint2*>(dst) = w;
    } else {
      // Odd tails pad the high nibble with 0 (NUMERICS.md, packing).
#pragma unroll
      for (int j = 0; j < V; j += 2)
        if (c0 + j < p.cols)
          dst[j / 2] = static_cast<std::uint8_t>(c[j] | (c0 + j + 1 < p.cols ? c[j + 1] << 4 : 0u));
    }
  } else {
    std::uint8_t* dst = p.codes + row * p.row_bytes + c0;
    if (vec_store) {
      uint4 w;
      w.x = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
      w.y = c[4] | (c[5] << 8) | (c[6] << 16) | (c[7] << 24);
      w.z = c[8] | (c[9] << 8) | (c[10] << 16) | (c[11] << 24);
      w.w = c[12] | (c[13] << 8) | (c[14] << 16) | (c[15] << 24);
      *reinterpret_cast<uint4*>(dst) = w;
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (c0 + j < p.cols) dst[j] = static_cast<std::uint8_t>(c[j]);
    }
  }
}

// block_rows x 128 tiles; 256 threads: column quad t % 32, rows t / 32 + 8 i.
__global__ void __launch_bounds__(256) quantize_block2d(params p) {
  constexpr int k_rows_per_thread = 16;  // block_rows <= 128
  const int cq = threadIdx.x % 32, r8 = threadIdx.x / 32;
  const std::int64_t br = blockIdx.y, bc = blockIdx.x;
  const std::int64_t row0 = br * p.block_rows, c0 = bc * 128 + cq * 4;
  const bool aligned = (p.cols & 3) == 0;
  float v[k_rows_per_thread][4];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < k_rows_per_thread; ++i) {
    const std::int64_t lr = r8 + 8 * i;
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
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (is_finite_f(v[i][j])) amax = fmaxf(amax, std::fabs(v[i][j]));
  }
  __shared__ float red[256];
  red[threadIdx.x] = amax;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const codec::scale_value s = symmetric_scale(p, red[0]);
  if (threadIdx.x == 0) store_scale_code(p, br * p.nb_cols + bc, s.code);
#pragma unroll
  for (int i = 0; i < k_rows_per_thread; ++i) {
    const std::int64_t lr = r8 + 8 * i;
    const std::int64_t row = row0 + lr;
    if (lr >= p.block_rows || row >= p.rows || c0 >= p.cols) continue;
    std::uint32_t c[4];
    encode4_div(p, v[i], s.value, c);
    store_codes4(p, row, c0, c, aligned);
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
