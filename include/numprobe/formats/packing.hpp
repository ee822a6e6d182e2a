#pragma once
// Sub-byte and checkpoint packing layouts, each with its exact inverse (NUMERICS.md,
// "Packing"), and the fast int4 -> fp16 "0x6400" dequantization emulated bit for bit.
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "numprobe/formats/scheme.hpp"

namespace numprobe::formats {

// fp4x2 (and any two 4-bit codes per byte): element 2i in the low nibble, 2i+1 in the high.
// An odd count leaves the last high nibble 0 (packed formats pad).
[[nodiscard]] std::vector<std::uint8_t> pack_nibbles(std::span<const std::uint8_t> codes);
[[nodiscard]] std::vector<std::uint8_t> unpack_nibbles(std::span<const std::uint8_t> bytes,
                                                       std::size_t count);

// Signed int4 from a nibble: (x << 4) >> 4 on a signed byte.
[[nodiscard]] constexpr std::int8_t sign_extend_int4(std::uint8_t nibble) {
  return static_cast<std::int8_t>(static_cast<std::int8_t>(nibble << 4) >> 4);
}

// AWQ: uint4 codes [K, N] (N = output features) -> int32 words [K, N / 8]. Nibble i (bits
// 4i..4i+3) of word j holds column 8j + k_awq_order[i], so that the 0x6400 trick, which yields
// nibbles in the order 0,4,1,5,2,6,3,7, produces columns in natural order. N % 8 == 0.
inline constexpr std::array<int, 8> k_awq_order = {0, 2, 4, 6, 1, 3, 5, 7};
[[nodiscard]] std::vector<std::uint32_t> pack_awq(std::span<const std::uint8_t> codes,
                                                  std::int64_t rows, std::int64_t cols);
[[nodiscard]] std::vector<std::uint8_t> unpack_awq(std::span<const std::uint32_t> words,
                                                   std::int64_t rows, std::int64_t cols);

// GPTQ qweight: uint4 codes [K, N] -> int32 words [ceil(K / 8), N], packed along K in order
// (nibble i of word (r, n) is row 8r + i). K % 8 != 0 pads with zero nibbles.
[[nodiscard]] std::vector<std::uint32_t> pack_gptq_weight(std::span<const std::uint8_t> codes,
                                                          std::int64_t k, std::int64_t n);
[[nodiscard]] std::vector<std::uint8_t> unpack_gptq_weight(std::span<const std::uint32_t> words,
                                                           std::int64_t k, std::int64_t n);

// GPTQ qzeros: zero points [groups, N] -> int32 [groups, ceil(N / 8)], in order along N.
// v1 stores (z - 1) & 0xF and adds 1 back at load (so z = 0 comes back as 16, as AutoGPTQ
// loads it); v2 stores z. Reading one as the other shifts every weight by one scale step.
enum class gptq_version : std::uint8_t { m_v1, m_v2 };
[[nodiscard]] std::vector<std::uint32_t> pack_gptq_zeros(std::span<const std::uint8_t> zeros,
                                                         std::int64_t groups, std::int64_t n,
                                                         gptq_version v);
[[nodiscard]] std::vector<int> unpack_gptq_zeros(std::span<const std::uint32_t> words,
                                                 std::int64_t groups, std::int64_t n,
                                                 gptq_version v);

// FP8 block weights as DeepSeek-V3 checkpoints store them: e4m3fn bytes [N, K] and an fp32
// `weight_scale_inv` [ceil(N / br), ceil(K / bc)] that dequant *multiplies* by.
struct fp8_block_checkpoint {
  std::int64_t rows = 0, cols = 0, block_rows = 128, block_cols = 128;
  std::vector<std::uint8_t> weight;
  std::vector<float> weight_scale_inv;
};
// From a block2d quantization with e4m3fn elements and fp32 scales (exit 2 otherwise).
[[nodiscard]] fp8_block_checkpoint to_fp8_block_checkpoint(const quant_result& q);
[[nodiscard]] std::vector<double> dequantize(const fp8_block_checkpoint& ckpt);

// The fast int4 -> fp16 trick of AWQ and Marlin on one packed int32, emulated with exact fp16
// arithmetic. Returns fp16 bit patterns in output order [n0, n4, n1, n5, n2, n6, n3, n7]
// (nibble index). Low nibbles: (0x6400 | v) - 1024; high nibbles: fma(0x6400 | v << 4, 1/16,
// -64). With `offset8` (Marlin symmetric) the constants are 1032 and -72, giving v - 8.
[[nodiscard]] std::array<std::uint16_t, 8> int4x8_to_f16_magic(std::uint32_t word,
                                                               bool offset8 = false);
// fp16 arithmetic (one rounding of the exact result; exact in double for these operands).
[[nodiscard]] std::uint16_t f16_sub(std::uint16_t a, std::uint16_t b);
[[nodiscard]] std::uint16_t f16_mul(std::uint16_t a, std::uint16_t b);
[[nodiscard]] std::uint16_t f16_fma(std::uint16_t a, std::uint16_t b, std::uint16_t c);
[[nodiscard]] std::uint16_t f16_bits(double x);  // RNE
[[nodiscard]] double f16_value(std::uint16_t bits);

}  // namespace numprobe::formats
