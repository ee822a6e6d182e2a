#pragma once
// A `llama-perplexity --kl-divergence-base FILE` file: the base model's log-probabilities,
// stored 16 bits per vocabulary entry, for the scored positions of each chunk, with the token
// stream they were computed on. `numprobe kl` reads it as BASE, CAND or --tokens.
//
// Layout, from llama.cpp tools/perplexity/perplexity.cpp: perplexity() writes it (the header
// and tokens itself, the rows in process_logits(std::ostream&, ...) and log_softmax(...,
// uint16_t*, ...)), kl_divergence() reads it back. Integers and floats in the writer's byte
// order (little-endian on every machine llama.cpp ships for; read as little-endian here):
//
//   char    magic[8]    "_logits_" (no terminator)
//   int32   n_ctx       tokens per chunk (kl_divergence() reads it as uint32)
//   int32   n_vocab
//   int32   n_chunk
//   int32   tokens[n_chunk * n_ctx]   the evaluated text, chunk after chunk
//   rows    n_chunk * (n_ctx - 1 - n_ctx / 2) of them, chunk after chunk, each of
//           W = 2 * ((n_vocab + 1) / 2) + 4 uint16 words:
//             float32 scale, float32 min_log_prob  (words 0..3)
//             uint16  q[n_vocab]                   (words 4 ..; one pad word when n_vocab is odd)
//
// Only the second half of each chunk is scored: row i of chunk c (i in [0, n_ctx - 1 - n_ctx/2))
// is the distribution at token index c n_ctx + n_ctx/2 + i, which predicts the token at index
// c n_ctx + n_ctx/2 + i + 1. The first n_ctx/2 positions of a chunk are context only, and the
// last position predicts past the chunk, so neither has a row.
//
// Encoding of one row of logits x (log_softmax(int, const float*, uint16_t*, int)), in float:
// m = max x, lo = max(min x, m - 16), lse = log(sum_j exp(x_j - m)) (the sum in double),
// scale = (m - lo) / 65535, min_log_prob = lo - m - lse, and
// q_j = round_half_even((1 / scale) (x_j - lo)) for x_j > lo, else 0 (all 0 when scale is 0).
// Decoding (log_softmax(..., const uint16_t*, ...)): log p_j = scale q_j + min_log_prob.
//
// Precision: a stored log-prob is within scale / 2 <= 8 / 65535 = 1.22e-4 nats of the true one
// (plus float rounding), for entries within 16 of the row's maximum logit; entries further down
// are clamped to min_log_prob (<= -16), and llama.cpp's KL skips every entry with
// log p <= -16 (metrics::compare_row_stored does the same).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "numprobe/io/mapped_file.hpp"
#include "numprobe/io/tensor_view.hpp"

namespace numprobe::io {

inline constexpr char k_llama_kl_magic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
inline constexpr std::size_t k_llama_kl_header_bytes = 20;  // magic, n_ctx, n_vocab, n_chunk

struct llama_kl_base {
  std::string source;
  std::int64_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
  tensor_view tokens;     // i32 [n_chunk * n_ctx]
  tensor_view log_probs;  // u16 [rows(), row_words()]: each row as stored (scale, min, codes)

  [[nodiscard]] std::int64_t first_scored() const { return n_ctx / 2; }
  [[nodiscard]] std::int64_t rows_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
  [[nodiscard]] std::int64_t rows() const { return n_chunk * rows_per_chunk(); }
  [[nodiscard]] std::int64_t row_words() const { return 2 * ((n_vocab + 1) / 2) + 4; }

  // Index into `tokens` of the position whose distribution row `row` holds.
  [[nodiscard]] std::int64_t position(std::int64_t row) const {
    return row / rows_per_chunk() * n_ctx + first_scored() + row % rows_per_chunk();
  }
  [[nodiscard]] std::int32_t token(std::int64_t index) const;

  // The token each row predicts (tokens[position(r) + 1]), which llama.cpp's statistics
  // score. Throws (exit 2, naming the file and index) on an id outside [0, n_vocab).
  [[nodiscard]] std::vector<std::int64_t> next_tokens() const;
};

// Whether `path` names a regular file that starts with the magic. False for anything that
// cannot be opened or read (whoever reads it next reports why).
[[nodiscard]] bool is_llama_kl_base(const std::string& path);

// Reads the header and checks every size in it against the file's size before anything is
// allocated. Throws numprobe::error (exit 2) naming the file: no magic, a header cut short,
// n_ctx < 3 (no scored position), n_vocab or n_chunk < 1, a file shorter or longer than its
// header says. The views share the file's memory map.
[[nodiscard]] llama_kl_base read_llama_kl_base(const std::string& path);
[[nodiscard]] llama_kl_base parse_llama_kl_base(std::shared_ptr<const mapped_file> file);

// Decodes one stored row (row_words() uint16 words, as in log_probs) into n_vocab = out.size()
// log-probs, the value llama.cpp's kl_divergence() uses: scale * q + min_log_prob in float,
// rounded after the product and after the sum (no fused multiply-add).
void decode_llama_kl_row(std::span<const std::byte> row, std::span<float> out);

}  // namespace numprobe::io
