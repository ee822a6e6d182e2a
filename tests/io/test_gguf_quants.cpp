// GGUF block decoders (issue 29) on hand-built blocks: each expected value is worked out from the
// format's definition (docs/checkpoints.md "GGUF": ggml-common.h's block structs, ggml-quants.c's
// dequantize_row_*), not from the decoder. gguf-py's own values, bit for bit, are
// test_gguf_quants_oracle's.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "io_test_util.hpp"
#include "numprobe/io/gguf.hpp"

namespace numprobe::io {
namespace {

using bytes = std::vector<std::uint8_t>;

void put16(bytes& b, std::uint16_t v) {
  b.push_back(static_cast<std::uint8_t>(v & 0xFF));
  b.push_back(static_cast<std::uint8_t>(v >> 8));
}
void put32(bytes& b, std::uint32_t v) {
  put16(b, static_cast<std::uint16_t>(v & 0xFFFF));
  put16(b, static_cast<std::uint16_t>(v >> 16));
}

std::span<const std::byte> as_bytes(const bytes& b) {
  return std::as_bytes(std::span<const std::uint8_t>(b));
}

std::vector<float> decode(ggml_type t, const bytes& b, std::size_t n) {
  std::vector<float> out(n, -12345.0f);  // poison: every element must be written
  dequantize_blocks(t, as_bytes(b), out);
  return out;
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// f16 codes of the scales used below.
constexpr std::uint16_t h_0_125 = 0x3000, h_0_25 = 0x3400, h_0_5 = 0x3800, h_1 = 0x3C00,
                        h_2 = 0x4000, h_minus_1 = 0xBC00;

// ggml-common.h kvalues_iq4nl and kvalues_mxfp4 (the latter twice the e2m1 values).
constexpr int k_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};
constexpr int k_e2m1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

TEST(gguf_quants, f32_keeps_every_bit) {
  bytes b;
  put32(b, 0x3FC00000u);  // 1.5
  put32(b, 0x7F800001u);  // a signalling NaN: kept as it is
  put32(b, 0x80000001u);  // the smallest negative subnormal
  const auto y = decode(ggml_type::m_f32, b, 3);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(bits(y[1]), 0x7F800001u);
  EXPECT_EQ(bits(y[2]), 0x80000001u);
}

TEST(gguf_quants, f16_widens_exactly) {
  bytes b;
  for (std::uint16_t h : {0x3C00, 0x0001, 0x7BFF, 0xFC00, 0x8000, 0x7C01, 0x03FF}) put16(b, h);
  const auto y = decode(ggml_type::m_f16, b, 7);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], std::ldexp(1.0f, -24));  // smallest subnormal f16: 2^-24
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], -INFINITY);
  EXPECT_EQ(bits(y[4]), 0x80000000u);       // -0
  EXPECT_EQ(bits(y[5]), 0x7F802000u);       // payload 1 << 13, signalling bit kept (NumPy)
  EXPECT_EQ(y[6], 1023.0f * std::ldexp(1.0f, -24));  // largest subnormal
}

TEST(gguf_quants, bf16_is_the_high_half) {
  bytes b;
  for (std::uint16_t h : {0x3FC0, 0xC000, 0x0001}) put16(b, h);
  const auto y = decode(ggml_type::m_bf16, b, 3);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(bits(y[2]), 0x00010000u);
}

// Q4_0: d = 0.5, byte j = j | (15 - j) << 4: y[j] = 0.5 (j - 8), y[16 + j] = 0.5 (15 - j - 8).
TEST(gguf_quants, q4_0) {
  bytes b;
  put16(b, h_0_5);
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  const auto y = decode(ggml_type::m_q4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(y[16 + j], 0.5f * static_cast<float>(7 - j)) << j;
  }
}

// Q4_1: d = 0.25, m = -1: y[j] = 0.25 j - 1, y[16 + j] = 0.25 (15 - j) - 1.
TEST(gguf_quants, q4_1) {
  bytes b;
  put16(b, h_0_25);
  put16(b, h_minus_1);
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  const auto y = decode(ggml_type::m_q4_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(y[16 + j], 0.25f * static_cast<float>(15 - j) - 1.0f) << j;
  }
}

// Q5_0: d = 1, qh = 0x0000FFFF (the fifth bit set for elements 0..15 only), byte j = j | j << 4:
// y[j] = (j + 16) - 16 = j, y[16 + j] = j - 16.
TEST(gguf_quants, q5_0) {
  bytes b;
  put16(b, h_1);
  put32(b, 0x0000FFFFu);
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<std::uint8_t>(j | (j << 4)));
  const auto y = decode(ggml_type::m_q5_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j)) << j;
    EXPECT_EQ(y[16 + j], static_cast<float>(j - 16)) << j;
  }
}

// Q5_1: d = 2, m = 0.5, qh = 0xFFFF0000, byte j = (15 - j) | j << 4:
// y[j] = 2 (15 - j) + 0.5, y[16 + j] = 2 (j + 16) + 0.5.
TEST(gguf_quants, q5_1) {
  bytes b;
  put16(b, h_2);
  put16(b, h_0_5);
  put32(b, 0xFFFF0000u);
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<std::uint8_t>((15 - j) | (j << 4)));
  const auto y = decode(ggml_type::m_q5_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * static_cast<float>(15 - j) + 0.5f) << j;
    EXPECT_EQ(y[16 + j], 2.0f * static_cast<float>(j + 16) + 0.5f) << j;
  }
}

// Q8_0: d = 0.125, q_j = 8 j - 128 (int8): y[j] = j - 16. Two blocks, the second with d = -1.
TEST(gguf_quants, q8_0) {
  bytes b;
  for (std::uint16_t d : {h_0_125, h_minus_1}) {
    put16(b, d);
    for (int j = 0; j < 32; ++j) b.push_back(static_cast<std::uint8_t>(8 * j - 128));
  }
  const auto y = decode(ggml_type::m_q8_0, b, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j - 16)) << j;
    EXPECT_EQ(y[32 + j], static_cast<float>(128 - 8 * j)) << j;
  }
}

// Q2_K: scales[s] = s | (15 - s) << 4, every qs byte 0xE4 = 0b11'10'01'00, so the 2-bit q of
// element i is its quarter of the 128-half, (i % 128) / 32; d = 1, dmin = 0.5:
// y[i] = s q - 0.5 (15 - s), s = i / 16.
TEST(gguf_quants, q2_k) {
  bytes b;
  for (int s = 0; s < 16; ++s) b.push_back(static_cast<std::uint8_t>(s | ((15 - s) << 4)));
  b.insert(b.end(), 64, 0xE4);
  put16(b, h_1);
  put16(b, h_0_5);
  const auto y = decode(ggml_type::m_q2_k, b, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 16;
    const int q = (i % 128) / 32;
    EXPECT_EQ(y[i], static_cast<float>(s * q) - 0.5f * static_cast<float>(15 - s)) << i;
  }
}

// Q2_K's qs lanes: byte 5 of the first half holds elements 5, 37, 69, 101; byte 32 + 7 holds
// elements 135, 167, 199, 231. Everything else zero; d = 1, dmin = 0, scales all 1.
TEST(gguf_quants, q2_k_lanes) {
  bytes b(16, 0x01);
  bytes qs(64, 0);
  qs[5] = 0b11'10'01'11;       // 3, 1, 2, 3 at shifts 0, 2, 4, 6
  qs[32 + 7] = 0b01'00'10'01;  // 1, 2, 0, 1
  b.insert(b.end(), qs.begin(), qs.end());
  put16(b, h_1);
  put16(b, 0);
  const auto y = decode(ggml_type::m_q2_k, b, 256);
  std::vector<float> want(256, 0.0f);
  want[5] = 3, want[37] = 1, want[69] = 2, want[101] = 3;
  want[135] = 1, want[167] = 2, want[199] = 0, want[231] = 1;
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], want[i]) << i;
}

// Q3_K: 6-bit scales v_s = s + 24, so v_s - 32 = s - 8. v_s for s < 8 is 24..31 (low 8 + s,
// high 1), for s >= 8 it is 32..39 (low s - 8, high 2). Bytes 0..7 hold low(s) | low(s + 8) << 4
// = (8 + j) | j << 4; byte 8 + k holds high(k) | high(k + 4) << 2 | high(k + 8) << 4 |
// high(k + 12) << 6 = 1 | 1 << 2 | 2 << 4 | 2 << 6 = 0xA5. qs all 0xE4: low2 = (i % 128) / 32.
// hmask bytes all 0x55: bit i / 32 set when i / 32 is even, so odd 32-groups subtract 4.
// d = 0.5: y[i] = 0.5 (s - 8) (low2 - (i / 32 odd ? 4 : 0)).
TEST(gguf_quants, q3_k) {
  bytes b(32, 0x55);
  b.insert(b.end(), 64, 0xE4);
  for (int j = 0; j < 8; ++j) b.push_back(static_cast<std::uint8_t>((8 + j) | (j << 4)));
  b.insert(b.end(), 4, 0xA5);
  put16(b, h_0_5);
  ASSERT_EQ(b.size(), 110u);
  const auto y = decode(ggml_type::m_q3_k, b, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 16;
    const int q = (i % 128) / 32 - ((i / 32) % 2 == 1 ? 4 : 0);
    EXPECT_EQ(y[i], 0.5f * static_cast<float>((s - 8) * q)) << i;
  }
}

// Q3_K with every scale bit set: v = 63, v - 32 = 31; qs 0, hmask 0: q = -4; d = 2: y = -248.
TEST(gguf_quants, q3_k_top_scale) {
  bytes b(32 + 64, 0);
  b.insert(b.end(), 12, 0xFF);
  put16(b, h_2);
  const auto y = decode(ggml_type::m_q3_k, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], -248.0f) << i;
}

// Q4_K / Q5_K scale bytes for sub-block scales sc[8] and mins m[8] (6 bits each), packed as
// ggml's quantize_row_q4_K_ref packs them: bytes 0..3 sc[j] | (sc[j + 4] >> 4) << 6,
// bytes 4..7 m[j] | (m[j + 4] >> 4) << 6, bytes 8..11 (sc[j + 4] & 15) | (m[j + 4] & 15) << 4.
bytes pack_k4(const int (&sc)[8], const int (&m)[8]) {
  bytes b(12, 0);
  for (int j = 0; j < 4; ++j) {
    b[j] = static_cast<std::uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b[j + 4] = static_cast<std::uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    b[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
  return b;
}
constexpr int k_sc[8] = {1, 2, 3, 63, 40, 17, 50, 63};
constexpr int k_min[8] = {0, 5, 63, 7, 33, 48, 2, 63};

// Q4_K: d = 1, dmin = 0.25; byte 32c + l = (l & 15) | (15 - (l & 15)) << 4, so element i of
// chunk c = i / 64 is l & 15 in the chunk's first 32 and 15 - (l & 15) in its last 32 (l = i % 32);
// y[i] = sc[s] q - 0.25 m[s], s = i / 32.
TEST(gguf_quants, q4_k) {
  bytes b;
  put16(b, h_1);
  put16(b, h_0_25);
  const bytes scales = pack_k4(k_sc, k_min);
  b.insert(b.end(), scales.begin(), scales.end());
  for (int k = 0; k < 128; ++k) {
    const int l = k % 32;
    b.push_back(static_cast<std::uint8_t>((l & 15) | ((15 - (l & 15)) << 4)));
  }
  const auto y = decode(ggml_type::m_q4_k, b, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    const int l = i % 32;
    const int q = (i % 64) < 32 ? (l & 15) : 15 - (l & 15);
    EXPECT_EQ(y[i], static_cast<float>(k_sc[s] * q) - 0.25f * static_cast<float>(k_min[s])) << i;
  }
}

// Q5_K: as Q4_K, plus qh bytes all 0xAA: the fifth bit of element i is bit i / 32 of qh[i % 32],
// set for odd sub-blocks: q += 16 there.
TEST(gguf_quants, q5_k) {
  bytes b;
  put16(b, h_1);
  put16(b, h_0_25);
  const bytes scales = pack_k4(k_sc, k_min);
  b.insert(b.end(), scales.begin(), scales.end());
  b.insert(b.end(), 32, 0xAA);
  for (int k = 0; k < 128; ++k) {
    const int l = k % 32;
    b.push_back(static_cast<std::uint8_t>((l & 15) | ((15 - (l & 15)) << 4)));
  }
  ASSERT_EQ(b.size(), 176u);
  const auto y = decode(ggml_type::m_q5_k, b, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    const int l = i % 32;
    const int q = ((i % 64) < 32 ? (l & 15) : 15 - (l & 15)) + (s % 2 == 1 ? 16 : 0);
    EXPECT_EQ(y[i], static_cast<float>(k_sc[s] * q) - 0.25f * static_cast<float>(k_min[s])) << i;
  }
}

// Q6_K: ql[k] = k, qh all 0xE4 (high2 of quarter t is t), scales sc[0] = -128, sc[1] = 127,
// sc[s] = s - 8 after; d = 0.5. Worked by hand, element i = 128 h + 32 t + l, its low nibble
// from ql[64 h + 32 (t & 1) + l] (low half for t < 2), q = low | t << 4 - 32,
// y = 0.5 sc[i / 16] q:
//   i = 0:   ql[0] = 0, low 0, t 0: q = -32; sc -128: y = 2048
//   i = 20:  ql[20] = 20, low 4, t 0: q = -28; sc 127: y = -1778
//   i = 47:  ql[47], low 15, t 1: q = -1; sc[2] = -6: y = 3
//   i = 70:  ql[6] = 6, high nibble 0, t 2: q = 0: y = 0
//   i = 200: ql[72], high nibble 4, t 2: q = 4; sc[12] = 4: y = 8
//   i = 255: ql[127], high nibble 7, t 3: q = 23; sc[15] = 7: y = 80.5
TEST(gguf_quants, q6_k) {
  bytes b;
  for (int k = 0; k < 128; ++k) b.push_back(static_cast<std::uint8_t>(k));
  b.insert(b.end(), 64, 0xE4);
  for (int s = 0; s < 16; ++s) {
    const int sc = s == 0 ? -128 : s == 1 ? 127 : s - 8;
    b.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(sc)));
  }
  put16(b, h_0_5);
  ASSERT_EQ(b.size(), 210u);
  const auto y = decode(ggml_type::m_q6_k, b, 256);
  EXPECT_EQ(y[0], 2048.0f);
  EXPECT_EQ(y[20], -1778.0f);
  EXPECT_EQ(y[47], 3.0f);
  EXPECT_EQ(y[70], 0.0f);
  EXPECT_EQ(y[200], 8.0f);
  EXPECT_EQ(y[255], 80.5f);
}

// IQ4_NL: d = 2, byte j = j | (15 - j) << 4: y[j] = 2 kv[j], y[16 + j] = 2 kv[15 - j].
TEST(gguf_quants, iq4_nl) {
  bytes b;
  put16(b, h_2);
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  const auto y = decode(ggml_type::m_iq4_nl, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * static_cast<float>(k_iq4nl[j])) << j;
    EXPECT_EQ(y[16 + j], 2.0f * static_cast<float>(k_iq4nl[15 - j])) << j;
  }
}

// IQ4_XS: d = 0.5, scales_l = 0x10 0x32 0x54 0x76 (low4 of sub-block s is s), scales_h = 0x00FF
// (high2 = 3 for s < 4, 0 after): sc - 32 = s + 16 for s < 4, s - 32 after. Sub-block s's 16
// bytes are j | (15 - j) << 4: y[32 s + j] = 0.5 sc kv[j], y[32 s + 16 + j] = 0.5 sc kv[15 - j].
TEST(gguf_quants, iq4_xs) {
  bytes b;
  put16(b, h_0_5);
  put16(b, 0x00FF);
  for (std::uint8_t v : {0x10, 0x32, 0x54, 0x76}) b.push_back(v);
  for (int s = 0; s < 8; ++s) {
    for (int j = 0; j < 16; ++j) b.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  }
  const auto y = decode(ggml_type::m_iq4_xs, b, 256);
  for (int s = 0; s < 8; ++s) {
    const int sc = s < 4 ? s + 16 : s - 32;
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[32 * s + j], 0.5f * static_cast<float>(sc * k_iq4nl[j])) << s << " " << j;
      EXPECT_EQ(y[32 * s + 16 + j], 0.5f * static_cast<float>(sc * k_iq4nl[15 - j]))
          << s << " " << j;
    }
  }
}

// MXFP4: e8m0 e scales the doubled e2m1 table by 2^(e - 128): e = 128 gives the table itself;
// e = 0 gives 2^-128 (a float32 subnormal); e = 255 gives 2^127, so 12 * 2^127 overflows to inf.
TEST(gguf_quants, mxfp4) {
  bytes b;
  for (std::uint8_t e : {128, 0, 255}) {
    b.push_back(e);
    for (int j = 0; j < 16; ++j) b.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  }
  const auto y = decode(ggml_type::m_mxfp4, b, 96);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(k_e2m1x2[j])) << j;
    EXPECT_EQ(y[16 + j], static_cast<float>(k_e2m1x2[15 - j])) << j;
    EXPECT_EQ(y[32 + j], std::ldexp(static_cast<float>(k_e2m1x2[j]), -128)) << j;
  }
  EXPECT_EQ(bits(y[32 + 1]), 0x00200000u);  // 2^-128
  EXPECT_EQ(y[64 + 1], std::ldexp(1.0f, 127));
  EXPECT_EQ(y[64 + 7], INFINITY);   // 12 * 2^127
  EXPECT_EQ(y[64 + 15], -INFINITY);
  EXPECT_EQ(bits(y[64 + 8]), 0u);   // code 8 is +0 in the table, not -0
}

// NVFP4: 4 unsigned e4m3 scales, halved (the table is doubled), one per 16 elements; a
// sub-block's 8 bytes give 8 low nibbles then 8 high nibbles. Scales worked by hand:
//   0x38: exponent 7, mantissa 0: 1.0, halved 0.5      0x00 and 0x7F: 0
//   0x01: subnormal 1 * 2^-9, halved 2^-10             0x7E: 1.75 * 2^8 = 448, halved 224
//   0xFF: bit 7 ignored, exponent 15, mantissa 7: 1.875 * 2^8 = 480, halved 240
//   0x80: bit 7 ignored, 0                              0x08: exponent 1: 2^-6, halved 2^-7
TEST(gguf_quants, nvfp4) {
  const std::uint8_t scales[2][4] = {{0x38, 0x00, 0x7F, 0x01}, {0x7E, 0xFF, 0x80, 0x08}};
  const float halved[2][4] = {{0.5f, 0.0f, 0.0f, std::ldexp(1.0f, -10)},
                              {224.0f, 240.0f, 0.0f, std::ldexp(1.0f, -7)}};
  bytes b;
  for (const auto& sc : scales) {
    b.insert(b.end(), sc, sc + 4);
    for (int s = 0; s < 4; ++s) {
      for (int j = 0; j < 8; ++j) b.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
    }
  }
  const auto y = decode(ggml_type::m_nvfp4, b, 128);
  for (int blk = 0; blk < 2; ++blk) {
    for (int s = 0; s < 4; ++s) {
      for (int j = 0; j < 8; ++j) {
        const float* ys = y.data() + 64 * blk + 16 * s;
        EXPECT_EQ(ys[j], halved[blk][s] * static_cast<float>(k_e2m1x2[j])) << blk << s << j;
        EXPECT_EQ(ys[8 + j], halved[blk][s] * static_cast<float>(k_e2m1x2[15 - j]))
            << blk << s << j;
      }
    }
  }
  // A zero scale times a negative code is -0 (IEEE), as NumPy gives it.
  EXPECT_EQ(bits(y[16 + 8]), 0x80000000u);  // block 0, sub-block 1, element 8: 0 * kv[15] = -0
}

// A NaN scale and a NaN minimum: the result is the scale's NaN (the product, quieted), as
// NumPy's (d * q) + m gives it for an array of blocks; a finite scale and a NaN minimum give the
// minimum's; inf * 0 is the default NaN 0xFFC00000 (x86).
TEST(gguf_quants, q4_1_nans_in_numpy_order) {
  bytes b;
  put16(b, 0x7C01);  // d: signalling NaN, payload 1 << 13
  put16(b, 0x7E03);  // m: quiet NaN, payload 3 << 13
  b.insert(b.end(), 16, 0x10);
  put16(b, h_1);
  put16(b, 0xFE05);  // m: negative quiet NaN
  b.insert(b.end(), 16, 0x10);
  put16(b, 0x7C00);  // d = inf
  put16(b, h_1);
  b.insert(b.end(), 16, 0x10);  // q = 0 (low), 1 (high)
  const auto y = decode(ggml_type::m_q4_1, b, 96);
  EXPECT_EQ(bits(y[0]), 0x7FC02000u);
  EXPECT_EQ(bits(y[16]), 0x7FC02000u);
  EXPECT_EQ(bits(y[32]), 0xFFC0A000u);
  EXPECT_EQ(bits(y[64]), 0xFFC00000u);  // inf * 0 + 1
  EXPECT_EQ(y[80], INFINITY);           // inf * 1 + 1
}

// -- sizes, refusals and the shared type table ---------------------------------------------

TEST(gguf_quants, partial_block_is_refused) {
  bytes b(17, 0);
  std::vector<float> out(32);
  test::expect_input_error(
      [&] { dequantize_blocks(ggml_type::m_q4_0, as_bytes(b), out); },
      "Q4_0", "17 bytes are not a whole number of 18-byte blocks");
}

TEST(gguf_quants, output_of_the_wrong_size_is_refused) {
  bytes b(36, 0);
  std::vector<float> out(63);
  test::expect_input_error(
      [&] { dequantize_blocks(ggml_type::m_q4_0, as_bytes(b), out); },
      "Q4_0", "2 blocks decode to 64 floats, not the 63 given");
}

// The decoders write through restrict pointers: decoding in place is refused, not undefined.
TEST(gguf_quants, output_overlapping_the_blocks_is_refused) {
  std::vector<float> buf(64, 0.0f);
  const auto blocks = std::as_bytes(std::span<const float>(buf)).subspan(0, 2 * 34);
  test::expect_input_error([&] { dequantize_blocks(ggml_type::m_q8_0, blocks, buf); }, "Q8_0",
                           "the output overlaps the blocks");
}

TEST(gguf_quants, undecoded_types_are_refused_by_name) {
  const std::pair<ggml_type, const char*> refused[] = {
      {ggml_type::m_iq2_xxs, "IQ2_XXS"}, {ggml_type::m_q8_k, "Q8_K"}, {ggml_type::m_q8_1, "Q8_1"},
      {ggml_type::m_tq1_0, "TQ1_0"},     {ggml_type::m_i8, "I8"},     {ggml_type::m_f64, "F64"},
      {ggml_type::m_q1_0, "Q1_0"},       {static_cast<ggml_type>(99), "number 99"},
  };
  for (const auto& r : refused) {
    bytes b(256, 0);
    std::vector<float> out(1);
    test::expect_input_error([&] { dequantize_blocks(r.first, as_bytes(b), out); },
                             std::string("GGUF type ") + r.second, "is not decoded");
  }
}

TEST(gguf_quants, empty_input_decodes_to_nothing) {
  std::vector<float> out;
  dequantize_blocks(ggml_type::m_q6_k, {}, out);
  SUCCEED();
}

// The decoders agree with the parser's type table (src/io/gguf.cpp): the types it marks as
// decoded are exactly those decoded here, with its block and byte counts.
TEST(gguf_quants, decoders_match_the_type_table) {
  int decoded = 0;
  for (std::uint32_t number = 0; number < 64; ++number) {
    const auto t = find_ggml_type(number);
    if (!t) continue;
    bytes b(static_cast<std::size_t>(t->type_size), 0);
    std::vector<float> out(static_cast<std::size_t>(t->block_size), -1.0f);
    bool accepted = true;
    try {
      dequantize_blocks(t->id, as_bytes(b), out);
    } catch (const numprobe::error&) {
      accepted = false;
    }
    EXPECT_EQ(accepted, t->decodes) << t->name;
    decoded += accepted ? 1 : 0;
  }
  EXPECT_EQ(decoded, 17);
}

}  // namespace
}  // namespace numprobe::io
