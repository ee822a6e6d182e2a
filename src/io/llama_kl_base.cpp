#include "numprobe/io/llama_kl_base.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <limits>

#include "numprobe/base/error.hpp"
#include "numprobe/io/regular_file.hpp"

namespace numprobe::io {
namespace {

std::uint32_t llama_le32(const std::byte* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

std::int32_t llama_le_i32(const std::byte* p) { return std::bit_cast<std::int32_t>(llama_le32(p)); }

// a * b, or the largest uint64 when that overflows: a header's sizes are untrusted, and a
// saturated need is still larger than any file, so it reads as "truncated".
std::uint64_t llama_mul_sat(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a)
    return std::numeric_limits<std::uint64_t>::max();
  return a * b;
}

std::uint64_t llama_add_sat(std::uint64_t a, std::uint64_t b) {
  return b > std::numeric_limits<std::uint64_t>::max() - a ? std::numeric_limits<std::uint64_t>::max()
                                                           : a + b;
}

}  // namespace

std::int32_t llama_kl_base::token(std::int64_t index) const {
  return llama_le_i32(tokens.bytes.data() + static_cast<std::size_t>(index) * 4);
}

std::vector<std::int64_t> llama_kl_base::next_tokens() const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows()));
  for (std::int64_t r = 0; r < rows(); ++r) {
    const std::int64_t at = position(r) + 1;  // <= c n_ctx + n_ctx - 1: inside the chunk
    const std::int32_t t = token(at);
    if (t < 0 || t >= n_vocab)
      throw_input_error(source, fmt::format("token id {} at index {} (predicted by row {}) is not in "
                                            "[0, n_vocab = {})",
                                            t, at, r, n_vocab));
    out[static_cast<std::size_t>(r)] = t;
  }
  return out;
}

bool is_llama_kl_base(const std::string& path) {
  if (why_not_regular(path)) return false;
  std::ifstream in(path, std::ios::binary);
  char head[sizeof k_llama_kl_magic] = {};
  if (!in.read(head, sizeof head)) return false;
  return std::memcmp(head, k_llama_kl_magic, sizeof head) == 0;
}

llama_kl_base read_llama_kl_base(const std::string& path) {
  require_regular_file(path);
  return parse_llama_kl_base(mapped_file::open(path));
}

llama_kl_base parse_llama_kl_base(std::shared_ptr<const mapped_file> file) {
  const auto bytes = file->bytes();
  const std::string& place = file->source();
  const std::uint64_t size = bytes.size();
  if (size < sizeof k_llama_kl_magic || std::memcmp(bytes.data(), k_llama_kl_magic, sizeof k_llama_kl_magic) != 0)
    throw_input_error(place, "not a llama-perplexity --kl-divergence-base file: it does not start with "
                             "\"_logits_\"");
  if (size < k_llama_kl_header_bytes)
    throw_input_error(place, fmt::format("llama-perplexity --kl-divergence-base header cut short: {} bytes, the "
                                         "header (magic, n_ctx, n_vocab, n_chunk) is {}{}",
                                         size, k_llama_kl_header_bytes,
                                         size == 12 ? " (llama-perplexity stops after 12 bytes when the text has "
                                                      "fewer than 2 n_ctx tokens)"
                                                    : ""));
  llama_kl_base b;
  b.source = place;
  b.n_ctx = llama_le_i32(bytes.data() + 8);
  b.n_vocab = llama_le_i32(bytes.data() + 12);
  b.n_chunk = llama_le_i32(bytes.data() + 16);
  // n_ctx >= 3 leaves n_ctx - 1 - n_ctx/2 >= 1 scored positions per chunk.
  if (b.n_ctx < 3)
    throw_input_error(place, fmt::format("n_ctx = {}: a chunk needs at least 3 tokens to have a scored "
                                         "position",
                                         b.n_ctx));
  if (b.n_vocab < 1) throw_input_error(place, fmt::format("n_vocab = {}: must be at least 1", b.n_vocab));
  if (b.n_chunk < 1) throw_input_error(place, fmt::format("n_chunk = {}: must be at least 1", b.n_chunk));

  // Every factor is below 2^31, so the token bytes (< 2^64) cannot overflow; the rows can.
  const auto n_tokens = static_cast<std::uint64_t>(b.n_ctx) * static_cast<std::uint64_t>(b.n_chunk);
  const std::uint64_t token_bytes = 4 * n_tokens;
  const auto row_bytes = 2 * static_cast<std::uint64_t>(b.row_words());
  const auto rows = static_cast<std::uint64_t>(b.rows());
  const std::uint64_t chunk_bytes =
      llama_mul_sat(row_bytes, static_cast<std::uint64_t>(b.rows_per_chunk()));
  const std::uint64_t need =
      llama_add_sat(k_llama_kl_header_bytes + token_bytes, llama_mul_sat(row_bytes, rows));
  if (size != need) {
    const std::string header = fmt::format("n_ctx = {}, n_vocab = {}, n_chunk = {}", b.n_ctx, b.n_vocab, b.n_chunk);
    const std::string need_text =
        need == std::numeric_limits<std::uint64_t>::max() ? "more than 2^64" : std::to_string(need);
    if (size > need)
      throw_input_error(place, fmt::format("{} bytes, {} more than its header ({}) accounts for", size,
                                           size - need, header));
    const std::uint64_t whole =
        size < k_llama_kl_header_bytes + token_bytes ? 0 : (size - k_llama_kl_header_bytes - token_bytes) / chunk_bytes;
    throw_input_error(place, fmt::format("truncated: {} bytes, its header ({}) needs {}; {} of {} chunks "
                                         "complete",
                                         size, header, need_text, whole, b.n_chunk));
  }

  const std::size_t token_at = k_llama_kl_header_bytes;
  b.tokens.name = "tokens";
  b.tokens.dtype = dtype::m_i32;
  b.tokens.shape = {n_tokens};
  b.tokens.bytes = bytes.subspan(token_at, static_cast<std::size_t>(token_bytes));
  b.tokens.source = place;
  b.tokens.owner = file;
  b.log_probs.dtype = dtype::m_u16;
  b.log_probs.shape = {rows, static_cast<std::uint64_t>(b.row_words())};
  b.log_probs.bytes = bytes.subspan(token_at + static_cast<std::size_t>(token_bytes));
  b.log_probs.source = place;
  b.log_probs.owner = std::move(file);
  return b;
}

void decode_llama_kl_row(std::span<const std::byte> row, std::span<float> out) {
  const float scale = std::bit_cast<float>(llama_le32(row.data()));
  const float min_log_prob = std::bit_cast<float>(llama_le32(row.data() + 4));
  const std::byte* q = row.data() + 8;
  for (std::size_t j = 0; j < out.size(); ++j) {
    const auto code = static_cast<std::uint16_t>(static_cast<unsigned>(q[2 * j]) |
                                                 static_cast<unsigned>(q[2 * j + 1]) << 8);
    // The product rounded on its own, as llama.cpp's source reads: fma(a, b, 0) is the rounded
    // product, spelled so that GCC (whose C++ default is -ffp-contract=fast) cannot fuse it
    // with the sum.
    const float scaled = std::fma(scale, static_cast<float>(code), 0.0f);
    out[j] = scaled + min_log_prob;
  }
}

}  // namespace numprobe::io
