#pragma once
// KL divergence between two next-token distributions, row by row, and the statistics that
// inference engineers read from llama.cpp's perplexity tool (--kl-divergence): KLD mean with
// its standard error, median and tail percentiles, "same top p" (top-1 agreement), the change
// in probability of the base model's top token (delta p), top-k overlap, and, given the true
// tokens, the perplexity ratio.
//
// Conventions (each one is what the tests check):
// - Rows are logits or log-probabilities; both go through a stable log-softmax in double
//   (row max subtracted, compensated sum of exp), which leaves log-probs unchanged.
// - KL(base || cand) = sum_i p_i (log p_i - log q_i), a compensated sum; not clamped at 0, so
//   rounding shows as tiny negative values rather than being hidden.
// - top-1 is the lowest index among the row maxima (std::max_element, numpy.argmax), so two
//   rows with the same tie agree.
// - top-k: the k largest values, ties broken by the lower index; overlap = |A n B| / k.
// - delta p = q(t) - p(t) for t the base row's top-1 token (in probability, not percent);
//   needs no tokens. With tokens, delta_p_token is llama.cpp's Δp: q(t) - p(t) for t the
//   token that follows the position.
// - Percentiles (kld.median ... p999, the delta p ones) are llama.cpp's (perplexity.cpp,
//   kl_divergence()'s `percentile` lambda): sorted values v_0 <= ... <= v_{n-1}, h = q (n - 1),
//   the value (1 - f) v_i + f v_{i+1} with i = floor(h), f = h - i (numpy's default "linear"),
//   so the median of an even count is the mean of the two middle values, as llama.cpp's median.
//   The exact nearest-rank ones (the ceil(q n)-th smallest), which kl reported before, stay in
//   kld_nearest_rank.
// - Standard error of a mean: sqrt(sum (x - mean)^2 / (n (n - 1))) (llama.cpp's
//   sqrt(var / (n - 1))); 0 when n < 2 (llama.cpp's is 0 when n <= 10). top-1 agreement's is
//   sqrt(a (1 - a) / (n - 1)). RMS's is llama.cpp's 0.5 / rms * (standard error of mean dp^2).
#include <cstdint>
#include <span>
#include <vector>

namespace numprobe::metrics {

// Stable log-softmax in double. out may alias x. x must be finite and non-empty.
void log_softmax(std::span<const double> x, std::span<double> out);

// Per-position comparison of one base row with one candidate row.
struct kl_row {
  double kld = 0.0;
  std::int64_t top_base = -1, top_cand = -1;
  double p_base_top = 0.0;    // p(t), t = top_base
  double q_base_top = 0.0;    // q(t)
  double topk_overlap = 0.0;  // in [0, 1]
  double nll_base = 0.0, nll_cand = 0.0;  // -log p(token), -log q(token); 0 without a token
};

// Scratch buffers reused across rows (one per thread).
struct kl_scratch {
  std::vector<double> lp, lq;
  std::vector<std::int64_t> top_a, top_b;
};

// Compares one row pair (equal, non-zero lengths, finite values). `token` < 0: no token.
// Two passes over the rows: (1) the top-k lists (top[0] is the row maximum) and a finiteness
// check; (2) one fused sweep computing sx = sum e^{a_i}, sy = sum e^{b_i} and
// t = sum e^{a_i} (a_i - b_i) (a = x - max x, b = y - max y; exp by src/metrics/fast_exp.hpp,
// < 1 ulp), each sum compensated; then KL = t / sx + log(sy / sx), p(top) = 1 / sx. This is
// the same KL as sum p (log p - log q), rearranged; tests/metrics/test_kl.cpp checks it against
// the textbook formula within a stated rounding bound.
[[nodiscard]] kl_row compare_row(std::span<const double> base, std::span<const double> cand,
                                 int topk, std::int64_t token, kl_scratch& scratch);

// The same, reporting non-finite input: false (and out.kld NaN) when either row holds a NaN
// or infinity. The float overload reads f32 rows in place (every float is exactly a double,
// so it gives bit for bit what the double overload gives on the widened rows).
[[nodiscard]] bool compare_row_checked(std::span<const double> base, std::span<const double> cand,
                                       int topk, std::int64_t token, kl_scratch& scratch,
                                       kl_row& out);
[[nodiscard]] bool compare_row_checked(std::span<const float> base, std::span<const float> cand,
                                       int topk, std::int64_t token, kl_scratch& scratch,
                                       kl_row& out);

// One side of a row pair for compare_row_stored: logits (or log-probs), which go through
// log_softmax, or log-probs decoded from a llama-perplexity --kl-divergence-base file
// (io/llama_kl_base.hpp), used as stored: renormalizing them would add the mass of the entries
// the format clamps at min_log_prob (up to V e^-16, 1.7% of the mass at V = 150K).
struct row_side {
  std::span<const double> values;
  bool stored = false;
};

// llama.cpp's KL when either row comes from a --kl-divergence-base file
// (tools/perplexity/perplexity.cpp, log_softmax(..., const uint16_t* base_log_prob, ...)):
// KL = sum over i with log p_i > -16 of p_i (log p_i - log q_i), p_i = e^{log p_i}, when the
// base is stored (llama.cpp skips the rest: it holds the clamped entries, whose value is not
// known); over every i with p_i > 0 when the base is logits. Compensated double sums; the
// same kl_row fields as compare_row (top-1 and top-k on the stored values, ties by the lower
// index, as llama.cpp's argmax). False (kld NaN) on a non-finite value.
[[nodiscard]] bool compare_row_stored(row_side base, row_side cand, int topk, std::int64_t token,
                                      kl_scratch& scratch, kl_row& out);

// llama.cpp's cut on a stored base's log-probs: entries at or below it do not enter the KL.
inline constexpr double k_stored_log_prob_cut = -16.0;

// Indices of the k largest values (ties: lower index first), largest first.
void top_k(std::span<const double> x, int k, std::vector<std::int64_t>& out);

// ceil(q n)-th smallest of v (nearest rank); reorders v. NaN on an empty vector.
[[nodiscard]] double percentile(std::vector<double>& v, double q);

// llama.cpp's percentile (kl_divergence()'s lambda): the linear interpolation between the
// order statistics around rank q (n - 1); q <= 0 gives the minimum, q >= 1 the maximum.
// Reorders v. NaN on an empty vector.
[[nodiscard]] double interpolated_percentile(std::vector<double>& v, double q);

struct mean_stderr {
  double mean = 0.0;
  double stderr_ = 0.0;
};
[[nodiscard]] mean_stderr mean_with_stderr(std::span<const double> v);

struct kl_position {
  std::int64_t row = 0;
  double kld = 0.0;
  std::int64_t top_base = -1, top_cand = -1;
  double p_base_top = 0.0, q_base_top = 0.0;
};

struct kl_summary {
  std::int64_t rows = 0, vocab = 0;
  struct {
    double mean = 0, stderr_ = 0, median = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, min = 0;
    double p001 = 0, p01 = 0, p05 = 0, p10 = 0, p95 = 0;  // the rest of llama.cpp's table
  } kld;
  struct {
    double median = 0, p90 = 0, p99 = 0, p999 = 0;
  } kld_nearest_rank;  // percentile(): kl's definitions before llama.cpp's
  double top1_agreement = 0.0, top1_stderr = 0.0;  // fraction of rows, in [0, 1]
  std::int64_t top1_same = 0;
  struct delta_p_stats {
    double mean = 0, stderr_ = 0, rms = 0, rms_stderr = 0, min = 0, p001 = 0, p01 = 0, p05 = 0,
           p10 = 0, p25 = 0, median = 0, p75 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0, max = 0;
  };
  delta_p_stats delta_p;        // at the base's top-1 token
  delta_p_stats delta_p_token;  // llama.cpp's: at the next token; only with tokens
  int topk = 0;
  double topk_overlap = 0.0;  // mean over rows
  bool has_tokens = false;
  struct {
    double base = 0, cand = 0, ratio = 0;        // exp(mean nll); ratio = cand / base
    double ln_ratio_mean = 0, ln_ratio_stderr = 0;  // mean of nll_cand - nll_base
  } ppl;
  std::vector<kl_position> worst;  // largest KL first
};

// Statistics over all rows; `worst` positions kept, ties by lower row.
[[nodiscard]] kl_summary summarize(std::span<const kl_row> rows, std::int64_t vocab, int topk,
                                   bool has_tokens, std::size_t worst);

}  // namespace numprobe::metrics
