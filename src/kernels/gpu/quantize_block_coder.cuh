#pragma once
// Per-block coding shared by every quantize kernel, one source for CUDA and HIP (platform.cuh):
// the launch parameters, block scales (symmetric, MX exponent, NVFP4), the element coder and the
// packed code stores. Bit-exact with numprobe::formats::quantize on the same float inputs;
// quantize_codec.cuh says how. fp8 elements are coded from v * (1 / s) where that provably gives
// the code of v / s (codec::e4m3_quotient), from the round-to-odd quotient elsewhere; no
// per-element division.
#include <cstdint>

#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/platform.cuh"
#include "src/kernels/gpu/quantize_codec.cuh"
#include "src/kernels/gpu/quantize_conventions.cuh"

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
  int mx_rule = 0;   // formats::mx_rule order: floor, ceil, rceil, even, nearest
  int mx_mbits = 1;  // the element's mantissa bits (the `even` rule's rounding)
  codec::nvfp4_conventions nv;  // NVFP4 axes; non-default ones run quantize_rows (launch_quantize)
  bool hw = true;
};

__device__ __forceinline__ bool is_finite_f(float v) { return std::fabs(v) <= 3.4028235e38f; }

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

// MX shared exponent X of the reference under p.mx_rule, clamped to [-127, 127].
__device__ __forceinline__ int mx_exponent(const params& p, float amax) {
  if (!(amax > 0.f)) return -127;
  const int x = codec::mx_exponent_rule(p.mx_rule, amax, p.elem_max, p.emax_elem, p.mx_mbits);
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
    if (!p.nv.is_default()) {
      // The convention axes: the block scale and thresholds of quantize_conventions.cuh.
      const codec::scale_value v = codec::nvfp4_block_scale(p.nv, amax, st);
      scode = v.code;
      b.zero = v.value == 0.f;
      if (!b.zero) b.pts = codec::nvfp4_thresholds(p.nv.division, v.value, st);
      return b;
    }
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

}  // namespace numprobe::gpu::quant
