#include "numprobe/metrics/kl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>

#include "numprobe/base/neumaier.hpp"
#include "src/metrics/fast_exp.hpp"

namespace numprobe::metrics {
namespace {

// Ordering for top-k: larger value first, then lower index.
bool ranks_before(double a, std::int64_t ia, double b, std::int64_t ib) {
  return a > b || (a == b && ia < ib);
}

}  // namespace

void log_softmax(std::span<const double> x, std::span<double> out) {
  double m = -std::numeric_limits<double>::infinity();
  for (double v : x) m = std::max(m, v);
  neumaier sum;
  for (double v : x) sum.add(std::exp(v - m));
  // The max term contributes exp(0) = 1, so the sum is >= 1 and the log is safe.
  const double lse = m + std::log(sum.value());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] - lse;
}

void top_k(std::span<const double> x, int k, std::vector<std::int64_t>& out) {
  out.clear();
  const auto kk = static_cast<std::size_t>(std::max(0, std::min<int>(k, static_cast<int>(x.size()))));
  if (kk == 0) return;
  // A sorted list of the best kk so far (best first); most elements fail the first compare.
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto ii = static_cast<std::int64_t>(i);
    if (out.size() == kk && !ranks_before(x[i], ii, x[out.back()], out.back())) continue;
    if (out.size() == kk) out.pop_back();
    auto pos = out.end();
    while (pos != out.begin() && ranks_before(x[i], ii, x[*(pos - 1)], *(pos - 1))) --pos;
    out.insert(pos, ii);
  }
}

namespace {

using fast_exp::exp_neg;

// Inserts index i (value xi) into the best-first list `top` of at most kk entries, exactly as
// top_k does: i is larger than every index already seen, so on a tie it ranks last.
template <class T>
void top_insert(const T* x, std::size_t i, std::size_t kk, std::vector<std::int64_t>& top) {
  const auto ii = static_cast<std::int64_t>(i);
  if (top.size() == kk && !(x[i] > x[top.back()])) return;
  if (top.size() == kk) top.pop_back();
  auto pos = top.end();
  while (pos != top.begin() && x[i] > x[*(pos - 1)]) --pos;
  top.insert(pos, ii);
}

// Pass 1 over a row: the kk best indices (top[0] is the first index of the maximum) and
// whether every value is finite. Vectorised: a chunk whose values are all <= the current
// k-th best cannot enter the list, so only chunks with a larger value are looked at one by
// one (on logits, a handful per row after the first few thousand entries).
template <class T>
bool scan_row(const T* x, std::size_t v, std::size_t kk, std::vector<std::int64_t>& top) {
  top.clear();
  std::size_t i = 0;
  bool finite = true;
#if NUMPROBE_FAST_EXP_AVX2
  if constexpr (std::is_same_v<T, float>) {
    constexpr std::size_t chunk = 32;
    __m256 bad = _mm256_setzero_ps();  // stays 0 unless x - x is NaN (x infinite or NaN)
    for (; i + chunk <= v; i += chunk) {
      const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8),
                   c = _mm256_loadu_ps(x + i + 16), d = _mm256_loadu_ps(x + i + 24);
      bad = _mm256_add_ps(bad, _mm256_sub_ps(a, a));
      bad = _mm256_add_ps(bad, _mm256_sub_ps(b, b));
      bad = _mm256_add_ps(bad, _mm256_sub_ps(c, c));
      bad = _mm256_add_ps(bad, _mm256_sub_ps(d, d));
      if (top.size() == kk) {
        const __m256 thr = _mm256_set1_ps(x[top.back()]);
        const __m256 m = _mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d));
        if (_mm256_movemask_ps(_mm256_cmp_ps(m, thr, _CMP_GT_OQ)) == 0) continue;
      }
      for (std::size_t j = i; j < i + chunk; ++j) top_insert(x, j, kk, top);
    }
    finite = _mm256_movemask_ps(_mm256_cmp_ps(bad, bad, _CMP_UNORD_Q)) == 0;
  } else {
    constexpr std::size_t chunk = 16;
    __m256d bad = _mm256_setzero_pd();
    for (; i + chunk <= v; i += chunk) {
      const __m256d a = _mm256_loadu_pd(x + i), b = _mm256_loadu_pd(x + i + 4),
                    c = _mm256_loadu_pd(x + i + 8), d = _mm256_loadu_pd(x + i + 12);
      bad = _mm256_add_pd(bad, _mm256_sub_pd(a, a));
      bad = _mm256_add_pd(bad, _mm256_sub_pd(b, b));
      bad = _mm256_add_pd(bad, _mm256_sub_pd(c, c));
      bad = _mm256_add_pd(bad, _mm256_sub_pd(d, d));
      if (top.size() == kk) {
        const __m256d thr = _mm256_set1_pd(x[top.back()]);
        const __m256d m = _mm256_max_pd(_mm256_max_pd(a, b), _mm256_max_pd(c, d));
        if (_mm256_movemask_pd(_mm256_cmp_pd(m, thr, _CMP_GT_OQ)) == 0) continue;
      }
      for (std::size_t j = i; j < i + chunk; ++j) top_insert(x, j, kk, top);
    }
    finite = _mm256_movemask_pd(_mm256_cmp_pd(bad, bad, _CMP_UNORD_Q)) == 0;
  }
#endif
  for (; i < v; ++i) {
    finite = finite && std::isfinite(x[i]);
    top_insert(x, i, kk, top);
  }
  return finite;
}

// Sums of a row pair after pass 1, each a compensated sum:
//   sx = sum exp(a_i), sy = sum exp(b_i), t = sum exp(a_i) (a_i - b_i),
// with a_i = x_i - max x, b_i = y_i - max y (exact for f32 data: two floats' difference fits
// a double unless their exponents are > 29 apart).
struct row_sums {
  double sx = 0, sy = 0, t = 0;
};

#if NUMPROBE_FAST_EXP_AVX2
template <class T>
__m256d load4(const T* p) {
  if constexpr (std::is_same_v<T, float>) return _mm256_cvtps_pd(_mm_loadu_ps(p));
  else return _mm256_loadu_pd(p);
}

// Vector Neumaier step, lane by lane: the same operations as neumaier::add.
void vadd(__m256d& s, __m256d& c, __m256d x) {
  const __m256d t = _mm256_add_pd(s, x);
  const __m256d sign = _mm256_set1_pd(-0.0);
  const __m256d ge = _mm256_cmp_pd(_mm256_andnot_pd(sign, s), _mm256_andnot_pd(sign, x), _CMP_GE_OQ);
  const __m256d big = _mm256_blendv_pd(x, s, ge), small = _mm256_blendv_pd(s, x, ge);
  c = _mm256_add_pd(c, _mm256_add_pd(_mm256_sub_pd(big, t), small));
  s = t;
}

void lanes_into(neumaier& acc, __m256d s, __m256d c) {
  alignas(32) double a[4], b[4];
  _mm256_store_pd(a, s);
  _mm256_store_pd(b, c);
  for (int i = 0; i < 4; ++i) acc.add(a[i]);
  for (int i = 0; i < 4; ++i) acc.add(b[i]);
}
#endif

// Pass 2, fused: both exponentials and all three sums in one sweep over the two rows (still
// in cache after pass 1). Blocks of 16 terms per lane are summed plainly and then added into
// per-lane Neumaier sums, so each sum's relative error is <= ~19u of the sum of |terms|
// (16 + 1 plain additions, plus Neumaier's 2u) whatever the row length.
template <class T>
row_sums sum_row(const T* x, const T* y, std::size_t v, double mx, double my) {
  neumaier sx, sy, st;
  std::size_t i = 0;
#if NUMPROBE_FAST_EXP_AVX2
  {
    const __m256d vmx = _mm256_set1_pd(mx), vmy = _mm256_set1_pd(my), zero = _mm256_setzero_pd();
    __m256d SX = zero, CX = zero, SY = zero, CY = zero, ST = zero, CT = zero;
    constexpr std::size_t step = 8, block = 16 * step;
    while (i + step <= v) {
      __m256d bx0 = zero, bx1 = zero, by0 = zero, by1 = zero, bt0 = zero, bt1 = zero;
      const std::size_t stop = std::min(v - v % step, i + block);
      for (; i < stop; i += step) {
        const __m256d a0 = _mm256_sub_pd(load4(x + i), vmx), a1 = _mm256_sub_pd(load4(x + i + 4), vmx);
        const __m256d b0 = _mm256_sub_pd(load4(y + i), vmy), b1 = _mm256_sub_pd(load4(y + i + 4), vmy);
        const __m256d ea0 = exp_neg(a0), ea1 = exp_neg(a1);
        const __m256d eb0 = exp_neg(b0), eb1 = exp_neg(b1);
        bx0 = _mm256_add_pd(bx0, ea0);
        bx1 = _mm256_add_pd(bx1, ea1);
        by0 = _mm256_add_pd(by0, eb0);
        by1 = _mm256_add_pd(by1, eb1);
        __m256d d0 = _mm256_sub_pd(a0, b0), d1 = _mm256_sub_pd(a1, b1);
        if constexpr (!std::is_same_v<T, float>) {
          // p = 0 contributes 0 even where a - b is infinite (f64 logits that overflowed in
          // x - max x); f32 data cannot overflow a double difference.
          d0 = _mm256_and_pd(d0, _mm256_cmp_pd(ea0, zero, _CMP_NEQ_OQ));
          d1 = _mm256_and_pd(d1, _mm256_cmp_pd(ea1, zero, _CMP_NEQ_OQ));
        }
        // Explicit FMA (not left to contraction) so f32 and f64 rows round the same way.
        bt0 = _mm256_fmadd_pd(ea0, d0, bt0);
        bt1 = _mm256_fmadd_pd(ea1, d1, bt1);
      }
      vadd(SX, CX, _mm256_add_pd(bx0, bx1));
      vadd(SY, CY, _mm256_add_pd(by0, by1));
      vadd(ST, CT, _mm256_add_pd(bt0, bt1));
    }
    lanes_into(sx, SX, CX);
    lanes_into(sy, SY, CY);
    lanes_into(st, ST, CT);
  }
#endif
  for (; i < v; ++i) {
    const double a = static_cast<double>(x[i]) - mx, b = static_cast<double>(y[i]) - my;
    const double ea = exp_neg(a), eb = exp_neg(b);
    sx.add(ea);
    sy.add(eb);
    // fma(p, d, 0) is the rounded product, spelled so no compiler contracts it into the sum.
    if (ea != 0.0) st.add(std::fma(ea, a - b, 0.0));
  }
  return {sx.value(), sy.value(), st.value()};
}

// |A n B| / |A| of the two top-k lists in the scratch (sorts them).
double overlap_of_tops(kl_scratch& s) {
  std::sort(s.top_a.begin(), s.top_a.end());
  std::sort(s.top_b.begin(), s.top_b.end());
  std::size_t both = 0;
  for (std::size_t i = 0, j = 0; i < s.top_a.size() && j < s.top_b.size();) {
    if (s.top_a[i] < s.top_b[j]) ++i;
    else if (s.top_b[j] < s.top_a[i]) ++j;
    else ++both, ++i, ++j;
  }
  return static_cast<double>(both) / static_cast<double>(s.top_a.size());
}

template <class T>
bool compare_impl(const T* x, const T* y, std::size_t v, int topk, std::int64_t token,
                  kl_scratch& s, kl_row& r) {
  r = kl_row{};
  const std::size_t kk = std::max<std::size_t>(1, std::min<std::size_t>(std::max(topk, 0), v));
  const bool fx = scan_row(x, v, kk, s.top_a);
  const bool fy = scan_row(y, v, kk, s.top_b);
  if (!fx || !fy) {
    r.kld = std::numeric_limits<double>::quiet_NaN();
    return false;
  }
  r.top_base = s.top_a.front();
  r.top_cand = s.top_b.front();
  const double mx = static_cast<double>(x[r.top_base]), my = static_cast<double>(y[r.top_cand]);
  const auto sums = sum_row(x, y, v, mx, my);
  // KL = sum p_i (log p_i - log q_i) with p_i = e^{a_i} / sx, log p_i = a_i - log sx, and the
  // same for q: KL = t / sx - log sx + log sy. log(sy / sx) keeps identical rows at exactly 0.
  r.kld = sums.t / sums.sx + std::log(sums.sy / sums.sx);
  // The base top token has a = 0: p = 1 / sx.
  r.p_base_top = 1.0 / sums.sx;
  r.q_base_top = std::exp(static_cast<double>(y[r.top_base]) - my) / sums.sy;
  if (topk > 0) r.topk_overlap = overlap_of_tops(s);
  if (token >= 0 && static_cast<std::size_t>(token) < v) {
    const auto t = static_cast<std::size_t>(token);
    r.nll_base = std::log(sums.sx) - (static_cast<double>(x[t]) - mx);
    r.nll_cand = std::log(sums.sy) - (static_cast<double>(y[t]) - my);
  }
  return true;
}

}  // namespace

kl_row compare_row(std::span<const double> base, std::span<const double> cand, int topk,
                   std::int64_t token, kl_scratch& s) {
  kl_row r;
  (void)compare_impl(base.data(), cand.data(), base.size(), topk, token, s, r);
  return r;
}

bool compare_row_checked(std::span<const double> base, std::span<const double> cand, int topk,
                         std::int64_t token, kl_scratch& s, kl_row& out) {
  return compare_impl(base.data(), cand.data(), base.size(), topk, token, s, out);
}

bool compare_row_checked(std::span<const float> base, std::span<const float> cand, int topk,
                         std::int64_t token, kl_scratch& s, kl_row& out) {
  return compare_impl(base.data(), cand.data(), base.size(), topk, token, s, out);
}

namespace {

// e^x for a log-prob: exp_neg where its domain holds (x <= 0; a stored log-prob can round a
// hair above 0), std::exp elsewhere.
double exp_log_prob(double x) { return x <= 0.0 ? exp_neg(x) : std::exp(x); }

// The log-normalizer that turns one side's values into log-probs: log sum e^x for logits
// (compensated, about the maximum `x[top]`), 0 for stored log-probs.
double log_normalizer(row_side side, std::int64_t top) {
  if (side.stored) return 0.0;
  const double m = side.values[static_cast<std::size_t>(top)];
  neumaier sum;
  for (double v : side.values) sum.add(exp_neg(v - m));
  return m + std::log(sum.value());  // the max contributes 1: the sum is >= 1
}

}  // namespace

bool compare_row_stored(row_side base, row_side cand, int topk, std::int64_t token, kl_scratch& s,
                        kl_row& r) {
  r = kl_row{};
  const std::size_t v = base.values.size();
  const std::size_t kk = std::max<std::size_t>(1, std::min<std::size_t>(std::max(topk, 0), v));
  const bool fx = scan_row(base.values.data(), v, kk, s.top_a);
  const bool fy = scan_row(cand.values.data(), v, kk, s.top_b);
  if (!fx || !fy) {
    r.kld = std::numeric_limits<double>::quiet_NaN();
    return false;
  }
  r.top_base = s.top_a.front();
  r.top_cand = s.top_b.front();
  const double lse_p = log_normalizer(base, r.top_base), lse_q = log_normalizer(cand, r.top_cand);
  const double cut = base.stored ? k_stored_log_prob_cut : -std::numeric_limits<double>::infinity();
  neumaier kl;
  for (std::size_t i = 0; i < v; ++i) {
    const double lp = base.values[i] - lse_p;
    if (!(lp > cut)) continue;
    const double p = exp_log_prob(lp);
    // fma(p, d, 0) is the rounded product, spelled so no compiler contracts it into the sum.
    if (p != 0.0) kl.add(std::fma(p, lp - (cand.values[i] - lse_q), 0.0));
  }
  r.kld = kl.value();
  const auto tb = static_cast<std::size_t>(r.top_base);
  r.p_base_top = exp_log_prob(base.values[tb] - lse_p);
  r.q_base_top = exp_log_prob(cand.values[tb] - lse_q);
  if (topk > 0) r.topk_overlap = overlap_of_tops(s);
  if (token >= 0 && static_cast<std::size_t>(token) < v) {
    const auto t = static_cast<std::size_t>(token);
    r.nll_base = lse_p - base.values[t];
    r.nll_cand = lse_q - cand.values[t];
  }
  return true;
}

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const auto n = static_cast<double>(v.size());
  auto rank = static_cast<std::int64_t>(std::ceil(q * n));  // 1-based nearest rank
  rank = std::clamp<std::int64_t>(rank, 1, static_cast<std::int64_t>(v.size()));
  auto it = v.begin() + (rank - 1);
  std::nth_element(v.begin(), it, v.end());
  return *it;
}

double interpolated_percentile(std::vector<double>& v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (q <= 0.0) return *std::min_element(v.begin(), v.end());
  if (q >= 1.0) return *std::max_element(v.begin(), v.end());
  const double h = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(h);
  const double f = h - static_cast<double>(i);
  auto it = v.begin() + static_cast<std::ptrdiff_t>(i);
  std::nth_element(v.begin(), it, v.end());
  const double lo = *it;
  // v_{i+1} is the smallest value above position i (nth_element left only larger ones there).
  const double hi = i + 1 < v.size() ? *std::min_element(it + 1, v.end()) : lo;
  return (1.0 - f) * lo + f * hi;  // llama.cpp's form of the interpolation
}

mean_stderr mean_with_stderr(std::span<const double> v) {
  mean_stderr r;
  if (v.empty()) return r;
  neumaier s;
  for (double x : v) s.add(x);
  const auto n = static_cast<double>(v.size());
  r.mean = s.value() / n;
  if (v.size() < 2) return r;
  neumaier d;
  for (double x : v) d.add((x - r.mean) * (x - r.mean));
  r.stderr_ = std::sqrt(d.value() / (n * (n - 1.0)));
  return r;
}

namespace {

// Mean, RMS and percentiles of per-row probability changes (reorders v).
kl_summary::delta_p_stats delta_p_summary(std::vector<double>& v) {
  kl_summary::delta_p_stats d;
  const auto m = mean_with_stderr(v);
  d.mean = m.mean;
  d.stderr_ = m.stderr_;
  std::vector<double> sq(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) sq[i] = v[i] * v[i];
  const auto ms = mean_with_stderr(sq);
  d.rms = std::sqrt(ms.mean);
  // llama.cpp: d rms = d(sqrt(ms)) = 0.5 / rms * d ms (first-order propagation); 0 at rms 0.
  d.rms_stderr = d.rms > 0.0 ? 0.5 / d.rms * ms.stderr_ : 0.0;
  d.min = *std::min_element(v.begin(), v.end());
  d.max = *std::max_element(v.begin(), v.end());
  d.p001 = interpolated_percentile(v, 0.001);
  d.p01 = interpolated_percentile(v, 0.01);
  d.p05 = interpolated_percentile(v, 0.05);
  d.p10 = interpolated_percentile(v, 0.10);
  d.p25 = interpolated_percentile(v, 0.25);
  d.median = interpolated_percentile(v, 0.50);
  d.p75 = interpolated_percentile(v, 0.75);
  d.p90 = interpolated_percentile(v, 0.90);
  d.p95 = interpolated_percentile(v, 0.95);
  d.p99 = interpolated_percentile(v, 0.99);
  d.p999 = interpolated_percentile(v, 0.999);
  return d;
}

}  // namespace

kl_summary summarize(std::span<const kl_row> rows, std::int64_t vocab, int topk, bool has_tokens,
                     std::size_t worst) {
  kl_summary s;
  s.rows = static_cast<std::int64_t>(rows.size());
  s.vocab = vocab;
  s.topk = topk;
  s.has_tokens = has_tokens;
  if (rows.empty()) return s;
  const auto n = static_cast<double>(rows.size());

  std::vector<double> v(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) v[i] = rows[i].kld;
  const auto k = mean_with_stderr(v);
  s.kld.mean = k.mean;
  s.kld.stderr_ = k.stderr_;
  s.kld.max = *std::max_element(v.begin(), v.end());
  s.kld.min = *std::min_element(v.begin(), v.end());
  s.kld.median = interpolated_percentile(v, 0.5);
  s.kld.p001 = interpolated_percentile(v, 0.001);
  s.kld.p01 = interpolated_percentile(v, 0.01);
  s.kld.p05 = interpolated_percentile(v, 0.05);
  s.kld.p10 = interpolated_percentile(v, 0.10);
  s.kld.p90 = interpolated_percentile(v, 0.90);
  s.kld.p95 = interpolated_percentile(v, 0.95);
  s.kld.p99 = interpolated_percentile(v, 0.99);
  s.kld.p999 = interpolated_percentile(v, 0.999);
  s.kld_nearest_rank.median = percentile(v, 0.5);
  s.kld_nearest_rank.p90 = percentile(v, 0.90);
  s.kld_nearest_rank.p99 = percentile(v, 0.99);
  s.kld_nearest_rank.p999 = percentile(v, 0.999);

  for (const auto& r : rows) s.top1_same += r.top_base == r.top_cand ? 1 : 0;
  s.top1_agreement = static_cast<double>(s.top1_same) / n;
  if (rows.size() > 1)
    s.top1_stderr = std::sqrt(s.top1_agreement * (1.0 - s.top1_agreement) / (n - 1.0));

  for (std::size_t i = 0; i < rows.size(); ++i) v[i] = rows[i].q_base_top - rows[i].p_base_top;
  s.delta_p = delta_p_summary(v);
  if (has_tokens) {  // llama.cpp's: e^-nll_cand - e^-nll_base, the next token's probabilities
    for (std::size_t i = 0; i < rows.size(); ++i) v[i] = std::exp(-rows[i].nll_cand) - std::exp(-rows[i].nll_base);
    s.delta_p_token = delta_p_summary(v);
  }

  {
    neumaier o;
    for (const auto& r : rows) o.add(r.topk_overlap);
    s.topk_overlap = o.value() / n;
  }

  if (has_tokens) {
    neumaier nb, nc;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      nb.add(rows[i].nll_base);
      nc.add(rows[i].nll_cand);
      v[i] = rows[i].nll_cand - rows[i].nll_base;
    }
    s.ppl.base = std::exp(nb.value() / n);
    s.ppl.cand = std::exp(nc.value() / n);
    const auto l = mean_with_stderr(v);
    s.ppl.ln_ratio_mean = l.mean;
    s.ppl.ln_ratio_stderr = l.stderr_;
    s.ppl.ratio = std::exp(l.mean);
  }

  std::vector<std::int64_t> idx(rows.size());
  std::iota(idx.begin(), idx.end(), 0);
  const std::size_t keep = std::min(worst, rows.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(),
                    [&](std::int64_t a, std::int64_t b) {
                      return rows[a].kld != rows[b].kld ? rows[a].kld > rows[b].kld : a < b;
                    });
  for (std::size_t i = 0; i < keep; ++i) {
    const auto& r = rows[static_cast<std::size_t>(idx[i])];
    s.worst.push_back({idx[i], r.kld, r.top_base, r.top_cand, r.p_base_top, r.q_base_top});
  }
  return s;
}

}  // namespace numprobe::metrics
