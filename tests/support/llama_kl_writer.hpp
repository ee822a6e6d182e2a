#pragma once
// Writes a `llama-perplexity --kl-divergence-base` file the way llama.cpp writes it, for the
// reader's and the kl command's tests. Derived from llama.cpp tools/perplexity/perplexity.cpp:
// perplexity() writes the magic and n_ctx when it opens the file, then n_vocab, n_chunk and
// the first n_chunk * n_ctx tokens; for each chunk, process_logits(std::ostream&, ...) writes
// the rows of positions n_ctx/2 ... n_ctx - 2, each encoded by log_softmax(int, const float*,
// uint16_t*, int) into nv = 2 ((n_vocab + 1) / 2) + 4 words (a buffer resized once, so an odd
// n_vocab's pad word stays 0). The float arithmetic below follows that function's, operation
// by operation; std::fma(a, b, 0) spells a product rounded on its own, so that no compiler
// fuses it with the addition that follows.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace numprobe::testing {

// llama.cpp's nearest_int: adding 1.5 * 2^23 rounds a float in [-2^22, 2^22] to an integer
// (to nearest, ties to even) whose value sits in the low mantissa bits.
inline int llama_nearest_int(float x) {
  const float shifted = x + 12582912.f;
  std::int32_t bits = 0;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// One row of logits -> nv words: float scale, float min_log_prob, then one code per entry.
inline std::vector<std::uint16_t> llama_encode_row(const float* logits, int n_vocab) {
  const int nv = 2 * ((n_vocab + 1) / 2) + 4;
  std::vector<std::uint16_t> w(static_cast<std::size_t>(nv), 0);
  float mx = logits[0], mn = logits[0];
  for (int i = 1; i < n_vocab; ++i) {
    mx = std::max(mx, logits[i]);
    mn = std::min(mn, logits[i]);
  }
  mn = std::max(mn, mx - 16);  // entries further down are clamped
  double sum_exp = 0.0;
  for (int i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - mx);  // expf: float argument
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float min_log_prob = mn - mx - log_sum_exp;
  const float scale = (mx - mn) / 65535.f;
  std::memcpy(w.data(), &scale, 4);
  std::memcpy(w.data() + 2, &min_log_prob, 4);
  if (scale != 0.0f) {
    const float inv_scale = 1 / scale;
    for (int i = 0; i < n_vocab; ++i)
      w[static_cast<std::size_t>(4 + i)] = static_cast<std::uint16_t>(
          logits[i] > mn ? llama_nearest_int(std::fma(inv_scale, logits[i] - mn, 0.0f)) : 0);
  }
  return w;
}

// A whole file. `scored[r]` is the logits row (n_vocab floats) of scored row r: chunk
// r / (n_ctx - 1 - n_ctx/2), position n_ctx/2 + r % (n_ctx - 1 - n_ctx/2).
inline std::string llama_kl_file_bytes(std::int32_t n_ctx, std::int32_t n_vocab, std::int32_t n_chunk,
                                       const std::vector<std::int32_t>& tokens,
                                       const std::vector<std::vector<float>>& scored) {
  std::string out("_logits_", 8);
  auto put32 = [&out](std::int32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  put32(n_ctx);
  put32(n_vocab);
  put32(n_chunk);
  out.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  for (const auto& row : scored) {
    const auto w = llama_encode_row(row.data(), n_vocab);
    out.append(reinterpret_cast<const char*>(w.data()), w.size() * 2);
  }
  return out;
}

inline void write_llama_kl_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace numprobe::testing
