// Packing layouts and their exact inverses. Every unpack reads only words the pack wrote, so
// a round trip is the identity on codes.
#include "numprobe/formats/packing.hpp"

#include <cmath>
#include <string>

#include "numprobe/base/error.hpp"

namespace numprobe::formats {
namespace {

void check_size(std::size_t have, std::int64_t want, const char* what) {
  if (static_cast<std::int64_t>(have) != want)
    throw_input_error(what, "has " + std::to_string(have) + " entries, expected " +
                                std::to_string(want));
}

}  // namespace

std::vector<std::uint8_t> pack_nibbles(std::span<const std::uint8_t> codes) {
  std::vector<std::uint8_t> out((codes.size() + 1) / 2, 0);
  for (std::size_t i = 0; i < codes.size(); ++i)
    out[i / 2] |= static_cast<std::uint8_t>((codes[i] & 0xFu) << (4 * (i % 2)));
  return out;
}

std::vector<std::uint8_t> unpack_nibbles(std::span<const std::uint8_t> bytes, std::size_t count) {
  check_size(bytes.size(), static_cast<std::int64_t>((count + 1) / 2), "packed nibbles");
  std::vector<std::uint8_t> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = (bytes[i / 2] >> (4 * (i % 2))) & 0xFu;
  return out;
}

std::vector<std::uint32_t> pack_awq(std::span<const std::uint8_t> codes, std::int64_t rows,
                                    std::int64_t cols) {
  if (cols % 8 != 0) throw_input_error("awq pack", "output features must be a multiple of 8");
  check_size(codes.size(), rows * cols, "awq codes");
  std::vector<std::uint32_t> out(static_cast<std::size_t>(rows * cols / 8), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols / 8; ++j) {
      std::uint32_t w = 0;
      for (int i = 0; i < 8; ++i)
        w |= static_cast<std::uint32_t>(codes[r * cols + 8 * j + k_awq_order[i]] & 0xFu) << (4 * i);
      out[r * (cols / 8) + j] = w;
    }
  return out;
}

std::vector<std::uint8_t> unpack_awq(std::span<const std::uint32_t> words, std::int64_t rows,
                                     std::int64_t cols) {
  if (cols % 8 != 0) throw_input_error("awq unpack", "output features must be a multiple of 8");
  check_size(words.size(), rows * cols / 8, "awq words");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols / 8; ++j)
      for (int i = 0; i < 8; ++i)
        out[r * cols + 8 * j + k_awq_order[i]] = (words[r * (cols / 8) + j] >> (4 * i)) & 0xFu;
  return out;
}

std::vector<std::uint32_t> pack_gptq_weight(std::span<const std::uint8_t> codes, std::int64_t k,
                                            std::int64_t n) {
  check_size(codes.size(), k * n, "gptq codes");
  const std::int64_t kw = (k + 7) / 8;
  std::vector<std::uint32_t> out(static_cast<std::size_t>(kw * n), 0);
  for (std::int64_t row = 0; row < k; ++row)
    for (std::int64_t c = 0; c < n; ++c)
      out[(row / 8) * n + c] |= static_cast<std::uint32_t>(codes[row * n + c] & 0xFu)
                                << (4 * (row % 8));
  return out;
}

std::vector<std::uint8_t> unpack_gptq_weight(std::span<const std::uint32_t> words, std::int64_t k,
                                             std::int64_t n) {
  check_size(words.size(), ((k + 7) / 8) * n, "gptq qweight");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(k * n));
  for (std::int64_t row = 0; row < k; ++row)
    for (std::int64_t c = 0; c < n; ++c)
      out[row * n + c] = (words[(row / 8) * n + c] >> (4 * (row % 8))) & 0xFu;
  return out;
}

std::vector<std::uint32_t> pack_gptq_zeros(std::span<const std::uint8_t> zeros,
                                           std::int64_t groups, std::int64_t n, gptq_version v) {
  check_size(zeros.size(), groups * n, "gptq zeros");
  const std::int64_t nw = (n + 7) / 8;
  std::vector<std::uint32_t> out(static_cast<std::size_t>(groups * nw), 0);
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t c = 0; c < n; ++c) {
      // v1 stores z - 1 (its loader adds 1 back); the 4-bit field wraps z = 0 to 15.
      const std::uint32_t z = v == gptq_version::m_v1 ? (zeros[g * n + c] - 1u) & 0xFu
                                                      : zeros[g * n + c] & 0xFu;
      out[g * nw + c / 8] |= z << (4 * (c % 8));
    }
  return out;
}

std::vector<int> unpack_gptq_zeros(std::span<const std::uint32_t> words, std::int64_t groups,
                                   std::int64_t n, gptq_version v) {
  const std::int64_t nw = (n + 7) / 8;
  check_size(words.size(), groups * nw, "gptq qzeros");
  std::vector<int> out(static_cast<std::size_t>(groups * n));
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t c = 0; c < n; ++c) {
      const int stored = static_cast<int>((words[g * nw + c / 8] >> (4 * (c % 8))) & 0xFu);
      out[g * n + c] = v == gptq_version::m_v1 ? stored + 1 : stored;
    }
  return out;
}

fp8_block_checkpoint to_fp8_block_checkpoint(const quant_result& q) {
  const auto& c = q.config;
  if (c.kind != scheme_kind::m_block2d || c.element != format_id::m_e4m3fn ||
      c.scale_format != format_id::m_f32)
    throw_input_error("fp8 block checkpoint",
                      "needs a block2d quantization with e4m3fn elements and fp32 scales");
  fp8_block_checkpoint ck;
  ck.rows = q.grid.rows;
  ck.cols = q.grid.cols;
  ck.block_rows = q.grid.block_rows;
  ck.block_cols = q.grid.block_cols;
  ck.weight.resize(q.codes.size());
  for (std::size_t i = 0; i < q.codes.size(); ++i)
    ck.weight[i] = static_cast<std::uint8_t>(q.codes[i]);
  ck.weight_scale_inv.resize(q.blocks.size());
  for (std::size_t b = 0; b < q.blocks.size(); ++b)
    ck.weight_scale_inv[b] = static_cast<float>(q.blocks[b].scale);  // an fp32 value already
  return ck;
}

std::vector<double> dequantize(const fp8_block_checkpoint& ck) {
  check_size(ck.weight.size(), ck.rows * ck.cols, "fp8 weight");
  const std::int64_t gc = (ck.cols + ck.block_cols - 1) / ck.block_cols;
  const std::int64_t gr = (ck.rows + ck.block_rows - 1) / ck.block_rows;
  check_size(ck.weight_scale_inv.size(), gr * gc, "weight_scale_inv");
  std::vector<double> out(ck.weight.size());
  for (std::int64_t r = 0; r < ck.rows; ++r)
    for (std::int64_t c = 0; c < ck.cols; ++c) {
      const double s = ck.weight_scale_inv[(r / ck.block_rows) * gc + c / ck.block_cols];
      out[r * ck.cols + c] = decode(format_id::m_e4m3fn, ck.weight[r * ck.cols + c]) * s;
    }
  return out;
}

std::uint16_t f16_bits(double x) { return static_cast<std::uint16_t>(encode(format_id::m_f16, x)); }
double f16_value(std::uint16_t bits) { return decode(format_id::m_f16, bits); }

// Each exact result below has at most 2 x 11 significant bits spread over fp16's exponent range
// (2^-48 .. 2^32 for products), so double holds it exactly and round_to rounds it once.
std::uint16_t f16_sub(std::uint16_t a, std::uint16_t b) {
  return f16_bits(f16_value(a) - f16_value(b));
}
std::uint16_t f16_mul(std::uint16_t a, std::uint16_t b) {
  return f16_bits(f16_value(a) * f16_value(b));
}
std::uint16_t f16_fma(std::uint16_t a, std::uint16_t b, std::uint16_t c) {
  // std::fma rounds a*b + c once to double; the fp16 rounding that follows is then exact
  // whenever the double result is (always for the trick's operands: integers below 2^11).
  return f16_bits(std::fma(f16_value(a), f16_value(b), f16_value(c)));
}

std::array<std::uint16_t, 8> int4x8_to_f16_magic(std::uint32_t word, bool offset8) {
  // The constants as the kernels hold them, as fp16 bit patterns.
  constexpr std::uint32_t k_magic = 0x64006400u;  // 1024 in each half
  constexpr std::uint32_t k_bottom = 0x000F000Fu, k_top = 0x00F000F0u;
  const std::uint16_t sub = offset8 ? 0x6408 : 0x6400;   // 1032 or 1024
  const std::uint16_t one_sixteenth = 0x2C00;            // 1/16
  const std::uint16_t neg = offset8 ? 0xD480 : 0xD400;   // -72 or -64
  const std::uint32_t top_word = word >> 8;
  // lop3 (x & mask) | magic, giving two fp16 halves per 32-bit register.
  const std::uint32_t h[4] = {(word & k_bottom) | k_magic, (word & k_top) | k_magic,
                              (top_word & k_bottom) | k_magic, (top_word & k_top) | k_magic};
  std::array<std::uint16_t, 8> out{};
  for (int r = 0; r < 4; ++r)
    for (int half = 0; half < 2; ++half) {
      const auto x = static_cast<std::uint16_t>(h[r] >> (16 * half));
      // Even registers hold a low nibble (value v at 2^0); odd ones v << 4 (value 16 v).
      out[2 * r + half] = (r % 2 == 0) ? f16_sub(x, sub) : f16_fma(x, one_sixteenth, neg);
    }
  return out;
}

}  // namespace numprobe::formats
