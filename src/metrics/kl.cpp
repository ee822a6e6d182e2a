#include "numprobe/metrics/kl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace numprobe::metrics {
namespace {

// Neumaier's compensated sum: error bounded by ~2u * sum |x_i|, independent of the length,
// so a 256K-entry row sums as accurately as a short one.
struct neumaier {
  double s = 0.0, c = 0.0;
  void add(double x) {
    const double t = s + x;
    c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  [[nodiscard]] double value() const { return s + c; }
};

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

kl_row compare_row(std::span<const double> base, std::span<const double> cand, int topk,
                   std::int64_t token, kl_scratch& s) {
  const std::size_t v = base.size();
  s.lp.resize(v);
  s.lq.resize(v);
  log_softmax(base, s.lp);
  log_softmax(cand, s.lq);
  kl_row r;
  neumaier kl;
  for (std::size_t i = 0; i < v; ++i) {
    const double p = std::exp(s.lp[i]);
    if (p != 0.0) kl.add(p * (s.lp[i] - s.lq[i]));  // p log p -> 0 as p -> 0
  }
  r.kld = kl.value();
  r.top_base = std::max_element(base.begin(), base.end()) - base.begin();
  r.top_cand = std::max_element(cand.begin(), cand.end()) - cand.begin();
  r.p_base_top = std::exp(s.lp[static_cast<std::size_t>(r.top_base)]);
  r.q_base_top = std::exp(s.lq[static_cast<std::size_t>(r.top_base)]);
  if (topk > 0) {
    top_k(base, topk, s.top_a);
    top_k(cand, topk, s.top_b);
    std::sort(s.top_a.begin(), s.top_a.end());
    std::sort(s.top_b.begin(), s.top_b.end());
    std::vector<std::int64_t> both;
    std::set_intersection(s.top_a.begin(), s.top_a.end(), s.top_b.begin(), s.top_b.end(),
                          std::back_inserter(both));
    r.topk_overlap = s.top_a.empty() ? 0.0
                                     : static_cast<double>(both.size()) /
                                           static_cast<double>(s.top_a.size());
  }
  if (token >= 0 && static_cast<std::size_t>(token) < v) {
    r.nll_base = -s.lp[static_cast<std::size_t>(token)];
    r.nll_cand = -s.lq[static_cast<std::size_t>(token)];
  }
  return r;
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
  s.kld.median = percentile(v, 0.5);
  s.kld.p90 = percentile(v, 0.90);
  s.kld.p99 = percentile(v, 0.99);
  s.kld.p999 = percentile(v, 0.999);

  for (const auto& r : rows) s.top1_same += r.top_base == r.top_cand ? 1 : 0;
  s.top1_agreement = static_cast<double>(s.top1_same) / n;
  if (rows.size() > 1)
    s.top1_stderr = std::sqrt(s.top1_agreement * (1.0 - s.top1_agreement) / (n - 1.0));

  for (std::size_t i = 0; i < rows.size(); ++i) v[i] = rows[i].q_base_top - rows[i].p_base_top;
  const auto d = mean_with_stderr(v);
  s.delta_p.mean = d.mean;
  s.delta_p.stderr_ = d.stderr_;
  {
    neumaier sq;
    for (double x : v) sq.add(x * x);
    s.delta_p.rms = std::sqrt(sq.value() / n);
  }
  s.delta_p.min = *std::min_element(v.begin(), v.end());
  s.delta_p.max = *std::max_element(v.begin(), v.end());
  s.delta_p.p01 = percentile(v, 0.01);
  s.delta_p.p05 = percentile(v, 0.05);
  s.delta_p.p10 = percentile(v, 0.10);
  s.delta_p.p25 = percentile(v, 0.25);
  s.delta_p.median = percentile(v, 0.50);
  s.delta_p.p75 = percentile(v, 0.75);
  s.delta_p.p90 = percentile(v, 0.90);
  s.delta_p.p95 = percentile(v, 0.95);
  s.delta_p.p99 = percentile(v, 0.99);

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
