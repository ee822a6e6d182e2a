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
// - delta p = q(t) - p(t) for t the base row's top-1 token (in probability, not percent).
// - Percentiles are exact nearest-rank: the q-quantile of n values is the ceil(q n)-th
//   smallest (1-based), so the median of an even count is the lower middle value.
// - Standard error of a mean: sqrt(sum (x - mean)^2 / (n (n - 1))) (llama.cpp's
//   sqrt(var / (n - 1))); 0 when n < 2. top-1 agreement's is sqrt(a (1 - a) / (n - 1)).
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

// Indices of the k largest values (ties: lower index first), largest first.
void top_k(std::span<const double> x, int k, std::vector<std::int64_t>& out);

// ceil(q n)-th smallest of v (nearest rank); reorders v. NaN on an empty vector.
[[nodiscard]] double percentile(std::vector<double>& v, double q);

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
  } kld;
  double top1_agreement = 0.0, top1_stderr = 0.0;  // fraction of rows, in [0, 1]
  std::int64_t top1_same = 0;
  struct {
    double mean = 0, stderr_ = 0, rms = 0, min = 0, p01 = 0, p05 = 0, p10 = 0, p25 = 0,
           median = 0, p75 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
  } delta_p;
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
