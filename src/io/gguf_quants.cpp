// GGUF block decoders: each block type of ggml decoded to float32 exactly as gguf-py 0.19.0's
// gguf.quants.dequantize computes it (issue 29). The layouts are ggml's block_* structs
// (ggml/src/ggml-common.h) and its dequantize_row_* (ggml/src/ggml-quants.c); the operation
// order is gguf-py's (gguf/quants.py); docs/checkpoints.md "GGUF" gives each rule.
//
// Why the arithmetic is exact whatever the compiler does with it. Every value is a product of a
// block scale and small integers, then, for the types with a minimum, one addition or
// subtraction. With a finite f16 scale (11 significant bits, |d| <= 65504) the products are
// exact in float32: the widest is Q6_K's d * scale * q, 11 + 7 + 5 = 23 bits, and none overflows
// or leaves the normal range (|d * 128 * 32| < 2^28, |d| >= 2^-24). So the one rounding is the
// final addition, and a fused multiply-add (the build does not pass -ffp-contract=off, and g++
// contracts by default) rounds a * b + c once too: the same float.
//
// What the NaNs are. NumPy's float32 ops, on x86, return the first NaN operand quieted, and the
// invalid products (inf * 0) give the default NaN (0xFFC00000); a NaN f16 keeps its payload and
// its signalling bit when NumPy widens it (npy_halfbits_to_floatbits). A product here has one
// possible NaN operand (the scale), so the hardware gives NumPy's NaN whichever order the
// compiler picks. An addition can have two (a NaN scale and a NaN minimum), where the operand
// order, and a contraction, would decide: blocks with a non-finite scale take a slower path
// that picks the NaN explicitly, in NumPy's order (a, then b, for a + b and a - b).
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/io/gguf.hpp"

namespace numprobe::io {
namespace {

constexpr std::size_t k_qk_k = 256;  // super-block of the K-quants and IQ4_XS (ggml's QK_K)

// ggml's kvalues_iq4nl and kvalues_mxfp4 (ggml-common.h); gguf-py IQ4_NL.kvalues and
// MXFP4.kvalues / NVFP4.kvalues. The e2m1 table is doubled (0.5 -> 1), so its scale is halved.
constexpr std::array<std::int8_t, 16> k_iq4nl_values{-127, -104, -83, -65, -49, -35, -22, -10,
                                                     1,    13,   25,  38,  53,  69,  89,  113};
constexpr std::array<std::int8_t, 16> k_e2m1_doubled{0, 1,  2,  3,  4,  6,  8,  12,
                                                     0, -1, -2, -3, -4, -6, -8, -12};

// -- reading the bytes ------------------------------------------------------------------------

using byte_ptr = const std::uint8_t*;

inline std::uint16_t le16(byte_ptr p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t le32(byte_ptr p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}

// binary16 -> binary32, exact, NaN payload and signalling bit kept (NumPy's
// npy_halfbits_to_floatbits; hardware F16C conversion would quiet a signalling NaN). A normal,
// inf or NaN half is re-biased in place (exponent + 112, or to 255 for inf/NaN); a subnormal
// (and zero) is its 10-bit mantissa times 2^-24, exact in float32. Selected by masks, not
// branches, and converted from a signed int, so that the F16 loop vectorizes.
constexpr float f16_value(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t mag = h & 0x7FFFu;
  const std::uint32_t rebias =
      0x38000000u + static_cast<std::uint32_t>(mag >= 0x7C00u) * 0x38000000u;
  const std::uint32_t normal = (mag << 13) + rebias;
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(static_cast<float>(static_cast<std::int32_t>(mag)) * 0x1p-24f);
  const std::uint32_t is_subnormal = 0u - static_cast<std::uint32_t>(mag < 0x0400u);
  return std::bit_cast<float>(sign | (subnormal & is_subnormal) | (normal & ~is_subnormal));
}
inline float f16(byte_ptr p) { return f16_value(le16(p)); }

// gguf-py MXFP4.e8m0_to_fp32_half (ggml_e8m0_to_fp32_half): 2^(e - 128) as bits, subnormal for
// e < 2; 255 is 2^127, not NaN.
constexpr float e8m0_half(std::uint8_t e) {
  const std::uint32_t bits = e < 2 ? (0x00200000u << e) : (std::uint32_t{e} - 1u) << 23;
  return std::bit_cast<float>(bits);
}

// gguf-py NVFP4.ue4m3_to_fp32 (ggml_ue4m3_to_fp32): the unsigned e4m3 scale, halved for the
// doubled e2m1 table. Bit 7 is ignored except that 0x7F (and 0) mean zero; 0xFF is 240.
// Every value is exact in float32: man * 2^-10, or (8 + man) * 2^(exp - 11).
constexpr std::array<float, 256> make_ue4m3_half() {
  std::array<float, 256> t{};
  for (int x = 0; x < 256; ++x) {
    const int exponent = (x >> 3) & 0xF;
    const int mantissa = x & 0x7;
    float v = 0.0f;
    if (x == 0 || x == 0x7F) {
      v = 0.0f;
    } else if (exponent == 0) {
      v = static_cast<float>(mantissa) / 1024.0f;
    } else {
      v = static_cast<float>(8 + mantissa);
      for (int e = exponent - 11; e > 0; --e) v *= 2.0f;
      for (int e = exponent - 11; e < 0; ++e) v /= 2.0f;
    }
    t[static_cast<std::size_t>(x)] = v;
  }
  return t;
}
constexpr std::array<float, 256> k_ue4m3_half = make_ue4m3_half();

// -- NumPy's NaN choice for a + b and a - b -----------------------------------------------------

inline float quieted(float x) {
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) | 0x00400000u);
}

// p + m (ADD) or p - m, p a product. FAST: both block scales are finite, so neither operand is
// NaN and any contraction is exact (see the top of the file). Otherwise the first NaN operand,
// quieted, as NumPy returns it.
template <bool FAST, bool ADD>
inline float combine(float p, float m) {
  if constexpr (!FAST) {
    if (std::isnan(p)) return quieted(p);
    if (std::isnan(m)) return quieted(m);
  }
  if constexpr (ADD) {
    return p + m;
  } else {
    return p - m;
  }
}

inline bool finite(float a, float b) { return std::isfinite(a) && std::isfinite(b); }

// -- one decoder per type: (block bytes, its floats) --------------------------------------------
// Each writes all of y, in gguf-py's element order (the same as ggml's dequantize_row_*). The
// loops follow the bit layout, with the sub-block scale fixed over each inner loop of 16 or 32,
// so that the compiler can vectorize them.

// Q4_0: f16 d | 16 bytes of nibbles; y[j] = d * (lo(j) - 8), y[j + 16] = d * (hi(j) - 8).
void q4_0(byte_ptr b, float* __restrict__ y) {
  const float d = f16(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((b[2 + j] & 0xF) - 8);
    y[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
  }
}

// Q4_1: f16 d | f16 m | 16 bytes of nibbles; y = d * q + m.
template <bool FAST>
void q4_1_block(float d, float m, byte_ptr qs, float* __restrict__ y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = combine<FAST, true>(d * static_cast<float>(qs[j] & 0xF), m);
    y[j + 16] = combine<FAST, true>(d * static_cast<float>(qs[j] >> 4), m);
  }
}
void q4_1(byte_ptr b, float* __restrict__ y) {
  const float d = f16(b);
  const float m = f16(b + 2);
  if (finite(d, m)) {
    q4_1_block<true>(d, m, b + 4, y);
  } else {
    q4_1_block<false>(d, m, b + 4, y);
  }
}

// Q5_0 / Q5_1's five bits: the nibble of byte j (low for elements 0..15, high for 16..31) and,
// as the fifth bit, bit e of the u32 qh for element e.
inline int q5_low(byte_ptr qs, std::uint32_t qh, int j) {
  return (qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
}
inline int q5_high(byte_ptr qs, std::uint32_t qh, int j) {
  return (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
}

// Q5_0: f16 d | u32 qh | 16 bytes of nibbles; y = d * (q - 16).
void q5_0(byte_ptr b, float* __restrict__ y) {
  const float d = f16(b);
  const std::uint32_t qh = le32(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(q5_low(b + 6, qh, j) - 16);
    y[j + 16] = d * static_cast<float>(q5_high(b + 6, qh, j) - 16);
  }
}

// Q5_1: f16 d | f16 m | u32 qh | 16 bytes of nibbles; y = d * q + m.
template <bool FAST>
void q5_1_block(float d, float m, std::uint32_t qh, byte_ptr qs, float* __restrict__ y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = combine<FAST, true>(d * static_cast<float>(q5_low(qs, qh, j)), m);
    y[j + 16] = combine<FAST, true>(d * static_cast<float>(q5_high(qs, qh, j)), m);
  }
}
void q5_1(byte_ptr b, float* __restrict__ y) {
  const float d = f16(b);
  const float m = f16(b + 2);
  if (finite(d, m)) {
    q5_1_block<true>(d, m, le32(b + 4), b + 8, y);
  } else {
    q5_1_block<false>(d, m, le32(b + 4), b + 8, y);
  }
}

// Q8_0: f16 d | 32 int8; y = q * d.
void q8_0(byte_ptr b, float* __restrict__ y) {
  const float d = f16(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
}

// Q2_K: 16 scale bytes (low nibble scale, high nibble min) | 64 bytes of 2-bit q | f16 d |
// f16 dmin. Element 128 h + 32 t + l is bits 2t..2t+1 of qs[32 h + l], in sub-block
// s = 8 h + 2 t + l / 16: y = (d * sc_s) * q - (dmin * m_s).
template <bool FAST>
void q2_k_block(float d, float dmin, byte_ptr scales, byte_ptr qs, float* __restrict__ y) {
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 4; ++t) {
      for (int half = 0; half < 2; ++half) {
        const int s = 8 * h + 2 * t + half;
        const float dl = d * static_cast<float>(scales[s] & 0xF);
        const float ml = dmin * static_cast<float>(scales[s] >> 4);
        byte_ptr q = qs + 32 * h + 16 * half;
        float* out = y + 16 * s;
        for (int l = 0; l < 16; ++l) {
          out[l] = combine<FAST, false>(dl * static_cast<float>((q[l] >> (2 * t)) & 3), ml);
        }
      }
    }
  }
}
void q2_k(byte_ptr b, float* __restrict__ y) {
  const float d = f16(b + 80);
  const float dmin = f16(b + 82);
  if (finite(d, dmin)) {
    q2_k_block<true>(d, dmin, b, b + 16, y);
  } else {
    q2_k_block<false>(d, dmin, b, b + 16, y);
  }
}

// Q3_K: 32 bytes hmask | 64 bytes of 2-bit q | 12 bytes of 6-bit scales | f16 d. Element
// i = 128 h + 32 t + l: low2 as Q2_K's, minus 4 when bit i / 32 of hmask[l] is clear; sub-block
// s = i / 16 has the 6-bit scale low4 | high2 << 4 (low4: nibble s of bytes 0..7, low nibbles
// first; high2: bits 2 (s / 4) of byte 8 + s % 4): y = (d * (sc_s - 32)) * q.
void q3_k(byte_ptr b, float* __restrict__ y) {
  byte_ptr hmask = b;
  byte_ptr qs = b + 32;
  byte_ptr sc = b + 96;
  const float d = f16(b + 108);
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 4; ++t) {
      const int bit = 4 * h + t;
      for (int half = 0; half < 2; ++half) {
        const int s = 8 * h + 2 * t + half;
        const int low = s < 8 ? (sc[s] & 0xF) : (sc[s - 8] >> 4);
        const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
        const float dl = d * static_cast<float>((low | (high << 4)) - 32);
        byte_ptr q = qs + 32 * h + 16 * half;
        byte_ptr hm = hmask + 16 * half;
        float* out = y + 16 * s;
        for (int l = 0; l < 16; ++l) {
          const int low2 = (q[l] >> (2 * t)) & 3;
          const int minus4 = ((hm[l] >> bit) & 1) != 0 ? 0 : 4;
          out[l] = dl * static_cast<float>(low2 - minus4);
        }
      }
    }
  }
}

// The 6-bit scale and min of sub-block j of Q4_K / Q5_K (ggml's get_scale_min_k4).
inline void scale_min_k4(byte_ptr q, int j, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K (qh null) and Q5_K: f16 d | f16 dmin | 12 bytes of 6-bit scales and mins | [32 bytes qh]
// | 128 bytes of nibbles. Chunk c of 64 elements: sub-block 2c is the low nibbles of bytes
// 32c..32c+31, sub-block 2c+1 their high nibbles; Q5_K's fifth bit of element 32 s + l is bit s of
// qh[l]. y = (d * sc_s) * q - (dmin * m_s).
template <bool FAST>
void k4_block(float d, float dmin, byte_ptr scales, byte_ptr qh, byte_ptr qs,
              float* __restrict__ y) {
  for (int s = 0; s < 8; ++s) {
    int sc = 0;
    int m = 0;
    scale_min_k4(scales, s, sc, m);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(m);
    byte_ptr q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    float* out = y + 32 * s;
    if (qh == nullptr) {
      for (int l = 0; l < 32; ++l) {
        out[l] = combine<FAST, false>(dl * static_cast<float>((q[l] >> shift) & 0xF), ml);
      }
    } else {
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0xF) | (((qh[l] >> s) & 1) << 4);
        out[l] = combine<FAST, false>(dl * static_cast<float>(v), ml);
      }
    }
  }
}
void k4(byte_ptr b, byte_ptr qh, byte_ptr qs, float* __restrict__ y) {
  const float d = f16(b);
  const float dmin = f16(b + 2);
  if (finite(d, dmin)) {
    k4_block<true>(d, dmin, b + 4, qh, qs, y);
  } else {
    k4_block<false>(d, dmin, b + 4, qh, qs, y);
  }
}
void q4_k(byte_ptr b, float* __restrict__ y) { k4(b, nullptr, b + 16, y); }
void q5_k(byte_ptr b, float* __restrict__ y) { k4(b, b + 16, b + 48, y); }

// Q6_K: 128 bytes ql | 64 bytes qh | 16 int8 scales | f16 d. Element 128 h + 32 t + l: low4 from
// ql[64 h + 32 (t % 2) + l] (low nibble for t < 2, high for t >= 2), high2 = bits 2t..2t+1 of
// qh[32 h + l]; y = (d * sc[i / 16]) * ((low4 | high2 << 4) - 32).
void q6_k(byte_ptr b, float* __restrict__ y) {
  byte_ptr ql = b;
  byte_ptr qh = b + 128;
  byte_ptr sc = b + 192;
  const float d = f16(b + 208);
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 4; ++t) {
      for (int half = 0; half < 2; ++half) {
        const int s = 8 * h + 2 * t + half;
        const float dl = d * static_cast<float>(static_cast<std::int8_t>(sc[s]));
        byte_ptr lo = ql + 64 * h + 32 * (t % 2) + 16 * half;
        byte_ptr hi = qh + 32 * h + 16 * half;
        const int nibble_shift = t < 2 ? 0 : 4;
        float* out = y + 16 * s;
        for (int l = 0; l < 16; ++l) {
          const int v = ((lo[l] >> nibble_shift) & 0xF) | (((hi[l] >> (2 * t)) & 3) << 4);
          out[l] = dl * static_cast<float>(v - 32);
        }
      }
    }
  }
}

// IQ4_NL: f16 d | 16 bytes of nibbles (as Q4_0); y = d * kvalues_iq4nl[q].
void iq4_nl(byte_ptr b, float* __restrict__ y) {
  const float d = f16(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(k_iq4nl_values[b[2 + j] & 0xF]);
    y[j + 16] = d * static_cast<float>(k_iq4nl_values[b[2 + j] >> 4]);
  }
}

// IQ4_XS: f16 d | u16 scales_h | 4 bytes scales_l | 128 bytes of nibbles; sub-block s of 32:
// sc = (nibble s of scales_l, low nibbles first | bits 2s..2s+1 of scales_h << 4) - 32; its 16
// bytes give 16 low then 16 high nibbles; y = (d * sc) * kvalues_iq4nl[q].
void iq4_xs(byte_ptr b, float* __restrict__ y) {
  const float d = f16(b);
  const std::uint16_t scales_h = le16(b + 2);
  byte_ptr scales_l = b + 4;
  byte_ptr qs = b + 8;
  for (int s = 0; s < 8; ++s) {
    const int low = (scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
    const int high = (scales_h >> (2 * s)) & 3;
    const float dl = d * static_cast<float>((low | (high << 4)) - 32);
    for (int j = 0; j < 16; ++j) {
      y[32 * s + j] = dl * static_cast<float>(k_iq4nl_values[qs[16 * s + j] & 0xF]);
      y[32 * s + j + 16] = dl * static_cast<float>(k_iq4nl_values[qs[16 * s + j] >> 4]);
    }
  }
}

// MXFP4: e8m0 e | 16 bytes of e2m1 nibbles; y = 2^(e - 128) * kvalues_mxfp4[q].
void mxfp4(byte_ptr b, float* __restrict__ y) {
  const float d = e8m0_half(b[0]);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(k_e2m1_doubled[b[1 + j] & 0xF]);
    y[j + 16] = d * static_cast<float>(k_e2m1_doubled[b[1 + j] >> 4]);
  }
}

// NVFP4: 4 ue4m3 scales | 32 bytes of e2m1 nibbles; sub-block s of 16: its 8 bytes give 8 low
// then 8 high nibbles; y = ue4m3(d_s) / 2 * kvalues_mxfp4[q].
void nvfp4(byte_ptr b, float* __restrict__ y) {
  for (int s = 0; s < 4; ++s) {
    const float d = k_ue4m3_half[b[s]];
    byte_ptr qs = b + 4 + 8 * s;
    for (int j = 0; j < 8; ++j) {
      y[16 * s + j] = d * static_cast<float>(k_e2m1_doubled[qs[j] & 0xF]);
      y[16 * s + j + 8] = d * static_cast<float>(k_e2m1_doubled[qs[j] >> 4]);
    }
  }
}

// -- dispatch ---------------------------------------------------------------------------------

template <std::size_t BLOCK, std::size_t BYTES, typename DECODE>
void each_block(byte_ptr in, std::size_t n_blocks, float* out, DECODE decode) {
  for (std::size_t i = 0; i < n_blocks; ++i) decode(in + i * BYTES, out + i * BLOCK);
}

// F16 and BF16 in runs of 16 (a loop of fixed length vectorizes at -O2), then the rest. Kept
// out of line: inlined into the dispatch, g++ 12 no longer vectorizes them (4x slower).
[[gnu::noinline]] void f16_elements(byte_ptr in, std::size_t n, float* __restrict__ y) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (std::size_t k = 0; k < 16; ++k) y[i + k] = f16_value(le16(in + 2 * (i + k)));
  }
  for (; i < n; ++i) y[i] = f16_value(le16(in + 2 * i));
}
[[gnu::noinline]] void bf16_elements(byte_ptr in, std::size_t n, float* __restrict__ y) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (std::size_t k = 0; k < 16; ++k) {
      y[i + k] = std::bit_cast<float>(std::uint32_t{le16(in + 2 * (i + k))} << 16);
    }
  }
  for (; i < n; ++i) y[i] = std::bit_cast<float>(std::uint32_t{le16(in + 2 * i)} << 16);
}

struct block_shape {
  std::size_t elements;  // per block
  std::size_t bytes;     // per block
};

// The types numprobe decodes and their blocks (gguf-py constants.GGML_QUANT_SIZES).
bool decoded_shape(ggml_type t, block_shape& shape) {
  switch (t) {
    case ggml_type::m_f32: shape = {1, 4}; return true;
    case ggml_type::m_f16: shape = {1, 2}; return true;
    case ggml_type::m_bf16: shape = {1, 2}; return true;
    case ggml_type::m_q4_0: shape = {32, 18}; return true;
    case ggml_type::m_q4_1: shape = {32, 20}; return true;
    case ggml_type::m_q5_0: shape = {32, 22}; return true;
    case ggml_type::m_q5_1: shape = {32, 24}; return true;
    case ggml_type::m_q8_0: shape = {32, 34}; return true;
    case ggml_type::m_q2_k: shape = {k_qk_k, 84}; return true;
    case ggml_type::m_q3_k: shape = {k_qk_k, 110}; return true;
    case ggml_type::m_q4_k: shape = {k_qk_k, 144}; return true;
    case ggml_type::m_q5_k: shape = {k_qk_k, 176}; return true;
    case ggml_type::m_q6_k: shape = {k_qk_k, 210}; return true;
    case ggml_type::m_iq4_nl: shape = {32, 18}; return true;
    case ggml_type::m_iq4_xs: shape = {k_qk_k, 136}; return true;
    case ggml_type::m_mxfp4: shape = {32, 17}; return true;
    case ggml_type::m_nvfp4: shape = {64, 36}; return true;
    default: return false;
  }
}

std::string type_name(ggml_type t) {
  const auto known = find_ggml_type(static_cast<std::uint32_t>(t));
  if (known) return std::string(known->name);
  return "number " + std::to_string(static_cast<std::uint32_t>(t));
}

}  // namespace

void dequantize_blocks(ggml_type type, std::span<const std::byte> blocks, std::span<float> out) {
  block_shape shape{};
  if (!decoded_shape(type, shape)) {
    throw_input_error("", "GGUF type " + type_name(type) +
                              " is not decoded (numprobe decodes F32, F16, BF16, Q4_0, Q4_1, "
                              "Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, "
                              "MXFP4, NVFP4)");
  }
  const std::string place = "GGUF type " + type_name(type);
  if (blocks.size() % shape.bytes != 0) {
    throw_input_error(place, std::to_string(blocks.size()) + " bytes are not a whole number of " +
                                 std::to_string(shape.bytes) + "-byte blocks");
  }
  const std::size_t n_blocks = blocks.size() / shape.bytes;
  if (out.size() != n_blocks * shape.elements) {
    throw_input_error(place, std::to_string(n_blocks) + " blocks decode to " +
                                 std::to_string(n_blocks * shape.elements) + " floats, not the " +
                                 std::to_string(out.size()) + " given");
  }
  const auto* in = reinterpret_cast<byte_ptr>(blocks.data());
  float* y = out.data();
  // The decoders write through __restrict__ pointers (so that their loops vectorize: a byte
  // pointer may alias anything, and the compiler would not vectorize without knowing).
  const auto in_at = reinterpret_cast<std::uintptr_t>(in);
  const auto out_at = reinterpret_cast<std::uintptr_t>(y);
  if (n_blocks != 0 && in_at < out_at + out.size_bytes() && out_at < in_at + blocks.size()) {
    throw_input_error(place, "the output overlaps the blocks");
  }
  switch (type) {
    case ggml_type::m_f32:
      if (n_blocks != 0) std::memcpy(y, in, n_blocks * 4);  // the bits as they are, NaNs too
      return;
    case ggml_type::m_f16: return f16_elements(in, n_blocks, y);
    case ggml_type::m_bf16: return bf16_elements(in, n_blocks, y);
    case ggml_type::m_q4_0: return each_block<32, 18>(in, n_blocks, y, q4_0);
    case ggml_type::m_q4_1: return each_block<32, 20>(in, n_blocks, y, q4_1);
    case ggml_type::m_q5_0: return each_block<32, 22>(in, n_blocks, y, q5_0);
    case ggml_type::m_q5_1: return each_block<32, 24>(in, n_blocks, y, q5_1);
    case ggml_type::m_q8_0: return each_block<32, 34>(in, n_blocks, y, q8_0);
    case ggml_type::m_q2_k: return each_block<k_qk_k, 84>(in, n_blocks, y, q2_k);
    case ggml_type::m_q3_k: return each_block<k_qk_k, 110>(in, n_blocks, y, q3_k);
    case ggml_type::m_q4_k: return each_block<k_qk_k, 144>(in, n_blocks, y, q4_k);
    case ggml_type::m_q5_k: return each_block<k_qk_k, 176>(in, n_blocks, y, q5_k);
    case ggml_type::m_q6_k: return each_block<k_qk_k, 210>(in, n_blocks, y, q6_k);
    case ggml_type::m_iq4_nl: return each_block<32, 18>(in, n_blocks, y, iq4_nl);
    case ggml_type::m_iq4_xs: return each_block<k_qk_k, 136>(in, n_blocks, y, iq4_xs);
    case ggml_type::m_mxfp4: return each_block<32, 17>(in, n_blocks, y, mxfp4);
    case ggml_type::m_nvfp4: return each_block<64, 36>(in, n_blocks, y, nvfp4);
    default: return;  // refused above
  }
}

}  // namespace numprobe::io
