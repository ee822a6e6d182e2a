#include "probes/softmax/softmax_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numeric>

#include "numprobe/core/result.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/base/neumaier.hpp"
#include "numprobe/metrics/kl.hpp"
#include "probes/tiles/tile_lengths.hpp"  // drift_lengths

namespace numprobe::probes {

using result::json_number;  // non-finite values in the schema's spelling
namespace {

using clock_type = std::chrono::steady_clock;
double elapsed_s(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

void update_max(double& m, double v) {
  if (std::isnan(v) || v > m) m = std::isnan(v) ? std::numeric_limits<double>::infinity() : v;
}

}  // namespace

softmax_errors compare_softmax(const softmax_output& cand, const softmax_output& ref, int topk) {
  softmax_errors e;
  const std::int64_t v = ref.vocab;
  const auto rows = static_cast<std::int64_t>(ref.rows.size());
  if (cand.vocab != v || cand.p.size() != ref.p.size() || cand.logp.size() != ref.logp.size() ||
      cand.lse.size() != ref.lse.size() || cand.ce.size() != ref.ce.size())
    throw_backend_error("softmax", "candidate output has the wrong shape");
  e.elements = rows * v;
  const double floor = 1e-3 / static_cast<double>(v);
  double num = 0.0, den = 0.0, kl_sum = 0.0, overlap_sum = 0.0;
  std::int64_t top1_same = 0;
  std::vector<std::int64_t> ta, tb;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* p = cand.p.data() + r * v;
    const double* pr = ref.p.data() + r * v;
    const double* lp = cand.logp.data() + r * v;
    const double* lpr = ref.logp.data() + r * v;
    bool row_nan = false;
    neumaier kl;
    for (std::int64_t i = 0; i < v; ++i) {
      if (std::isnan(p[i]) || std::isnan(lp[i])) {
        ++e.nan_count;
        row_nan = true;
        continue;
      }
      if (std::isinf(p[i]) || (std::isinf(lp[i]) && std::isfinite(lpr[i]))) ++e.inf_count;
      const double d = p[i] - pr[i];
      num += d * d;
      den += pr[i] * pr[i];
      update_max(e.p_max_abs, std::fabs(d));
      update_max(e.p_max_rel, std::fabs(d) / std::max(pr[i], floor));
      if (std::isfinite(lpr[i])) update_max(e.logp_max_abs, std::fabs(lp[i] - lpr[i]));
      if (pr[i] > 0) kl.add(pr[i] * (lpr[i] - lp[i]));  // -inf candidate log p gives +inf
    }
    const double kl_row = row_nan ? std::numeric_limits<double>::infinity() : kl.value();
    kl_sum += kl_row;
    update_max(e.kl_max, kl_row);
    auto scalar = [&](double c, double rf, double& worst) {
      if (std::isnan(c)) {
        ++e.nan_count;
        worst = std::numeric_limits<double>::infinity();
        return;
      }
      if (c == rf) return;  // equal, including both -inf
      if (std::isinf(c) || std::isinf(rf)) ++e.inf_count;
      update_max(worst, std::fabs(c - rf));
    };
    scalar(cand.lse[static_cast<std::size_t>(r)], ref.lse[static_cast<std::size_t>(r)], e.lse_max_abs);
    scalar(cand.ce[static_cast<std::size_t>(r)], ref.ce[static_cast<std::size_t>(r)], e.ce_max_abs);
    // Agreement of the distributions' heads; a fully masked row agrees when both say so.
    if (std::isinf(ref.lse[static_cast<std::size_t>(r)])) {
      const bool same = std::isinf(cand.lse[static_cast<std::size_t>(r)]) && !row_nan;
      top1_same += same;
      overlap_sum += same ? 1.0 : 0.0;
      continue;
    }
    if (row_nan) continue;
    const std::span<const double> a(pr, static_cast<std::size_t>(v)), b(p, static_cast<std::size_t>(v));
    top1_same += (std::max_element(a.begin(), a.end()) - a.begin()) ==
                 (std::max_element(b.begin(), b.end()) - b.begin());
    const int k = static_cast<int>(std::min<std::int64_t>(topk, v));
    if (k > 0) {
      metrics::top_k(a, k, ta);
      metrics::top_k(b, k, tb);
      std::sort(ta.begin(), ta.end());
      std::sort(tb.begin(), tb.end());
      std::vector<std::int64_t> both;
      std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(both));
      overlap_sum += static_cast<double>(both.size()) / k;
    } else {
      overlap_sum += 1.0;
    }
  }
  e.p_rel_rms = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (e.nan_count > 0) e.p_rel_rms = std::numeric_limits<double>::infinity();
  e.kl_mean = rows ? kl_sum / static_cast<double>(rows) : 0.0;
  e.top1 = rows ? static_cast<double>(top1_same) / static_cast<double>(rows) : 1.0;
  e.topk_overlap = rows ? overlap_sum / static_cast<double>(rows) : 1.0;
  return e;
}

std::optional<double> softmax_point::metric(const std::string& name) const {
  if (name == "rel_rms" || name == "p_rel_rms") return kernel.p_rel_rms;
  if (name == "p_max_abs") return kernel.p_max_abs;
  if (name == "p_max_rel") return kernel.p_max_rel;
  if (name == "logp_max_abs") return kernel.logp_max_abs;
  if (name == "lse_max_abs") return kernel.lse_max_abs;
  if (name == "ce_max_abs") return kernel.ce_max_abs;
  if (name == "kl_mean") return kernel.kl_mean;
  if (name == "kl_max") return kernel.kl_max;
  if (name == "top1") return kernel.top1;
  if (name == "topk") return kernel.topk_overlap;
  if (name == "ratio_to_naive") return ratio_to_naive;
  if (name == "nan_count") return static_cast<double>(kernel.nan_count);
  if (name == "inf_count") return static_cast<double>(kernel.inf_count);
  if (name == "naive.rel_rms") return naive.p_rel_rms;
  if (name == "e2e.rel_rms" && end_to_end) return end_to_end->p_rel_rms;
  if (name == "e2e.kl_mean" && end_to_end) return end_to_end->kl_mean;
  return std::nullopt;
}

const std::vector<std::string>& softmax_metric_names() {
  static const std::vector<std::string> n{"rel_rms", "p_max_abs", "p_max_rel", "logp_max_abs",
                                          "lse_max_abs", "ce_max_abs", "kl_mean", "kl_max",
                                          "top1", "topk", "ratio_to_naive", "nan_count",
                                          "inf_count", "naive.rel_rms", "e2e.rel_rms", "e2e.kl_mean"};
  return n;
}

bound default_softmax_bound() {
  bound b = parse_bound("ratio_to_naive<=2");
  b.basis = "FlashAttention's test criterion applied to softmax: within 2x of a naive fp32 softmax's error "
            "on the same logits, floored at half torch.testing's float32 rtol (6.5e-7)";
  b.is_default = true;
  return b;
}

softmax_point run_softmax_point(softmax_provider& k, const softmax_case& c, const softmax_probe_options& o) {
  c.validate();
  softmax_point p;
  p.case_id = c.id();
  p.vocab = c.vocab;
  p.rows = c.rows;
  p.chunks = k.chunk() > 0 ? (c.vocab + k.chunk() - 1) / k.chunk() : 1;
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows));
  std::iota(rows.begin(), rows.end(), std::int64_t{0});
  const auto logits = softmax_logits(c, rows, true);
  auto t0 = clock_type::now();
  const softmax_output cand = k.run(c, logits, rows);
  p.seconds_kernel = elapsed_s(t0);
  if (cand.rows != rows) throw_backend_error(k.name(), "returned the wrong rows");
  t0 = clock_type::now();
  const softmax_output ref = reference::softmax(c, logits, rows);
  p.seconds_reference = elapsed_s(t0);
  const softmax_output naive = reference::softmax_naive(c, logits, rows);
  p.kernel = compare_softmax(cand, ref, o.topk);
  p.naive = compare_softmax(naive, ref, o.topk);
  if (o.end_to_end) {
    const auto exact = softmax_logits(c, rows, false);
    p.end_to_end = compare_softmax(cand, reference::softmax(c, exact, rows), o.topk);
  }
  p.ratio_to_naive = p.kernel.p_rel_rms / std::max(p.naive.p_rel_rms, k_softmax_noise_floor);
  return p;
}

softmax_sweep run_softmax_sweep(softmax_provider& k, const softmax_sweep_options& o) {
  const auto t0 = clock_type::now();
  softmax_sweep s;
  s.kernel = k.name();
  s.chunk = k.chunk();
  for (const auto& b : o.bounds) {
    softmax_point probe_point;
    if (b.metric != "growth.slope" && !probe_point.metric(b.metric) && b.metric.rfind("e2e.", 0) != 0)
      throw_input_error("--bound", fmt::format("unknown metric '{}' for softmax", b.metric));
  }
  if (o.vocab_lo < 1 || o.vocab_hi < o.vocab_lo)
    throw_input_error("--vocab", fmt::format("need 1 <= A <= B in A..B, got {}..{}", o.vocab_lo, o.vocab_hi));
  const auto lengths = drift_lengths(o.points, o.vocab_lo, o.vocab_hi, s.chunk > 0 ? s.chunk : 0);
  std::vector<double> xs, ys;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    softmax_case c = o.base;
    c.vocab = lengths[i];
    if (c.masked > c.vocab) c.masked = c.vocab;
    softmax_point p = run_softmax_point(k, c, o.probe);
    s.chunk = k.chunk();
    if (p.nonfinite()) ++s.nan_points;
    xs.push_back(static_cast<double>(p.chunks));
    ys.push_back(p.kernel.p_rel_rms);
    for (const auto& b : o.bounds) {
      if (b.metric == "growth.slope") continue;
      const auto m = p.metric(b.metric);
      if (m && !b.holds(*m)) s.breaches.push_back({c.vocab, b.text(), *m});
    }
    s.points.push_back(std::move(p));
    if (o.on_point) o.on_point(i + 1, lengths.size(), c.vocab);
  }
  s.growth = metrics::fit_growth(xs, ys);
  for (const auto& b : o.bounds)
    if (b.metric == "growth.slope" && !b.holds(s.growth.slope)) s.breaches.push_back({0, b.text(), s.growth.slope});
  s.gated_breach = !s.breaches.empty() || s.nan_points > 0;
  s.seconds = elapsed_s(t0);
  return s;
}

nlohmann::json to_json(const softmax_errors& e) {
  return {{"p_rel_rms", json_number(e.p_rel_rms)}, {"p_max_abs", json_number(e.p_max_abs)},
          {"p_max_rel", json_number(e.p_max_rel)}, {"logp_max_abs", json_number(e.logp_max_abs)},
          {"lse_max_abs", json_number(e.lse_max_abs)}, {"ce_max_abs", json_number(e.ce_max_abs)},
          {"kl_mean", json_number(e.kl_mean)}, {"kl_max", json_number(e.kl_max)},
          {"top1", json_number(e.top1)}, {"topk_overlap", json_number(e.topk_overlap)},
          {"nan_count", e.nan_count}, {"inf_count", e.inf_count}, {"elements", e.elements}};
}

nlohmann::json to_json(const softmax_point& p) {
  nlohmann::json j = {{"case", p.case_id},
                      {"vocab", p.vocab},
                      {"rows", p.rows},
                      {"chunks", p.chunks},
                      {"rel_rms", json_number(p.kernel.p_rel_rms)},
                      {"lse_max_abs", json_number(p.kernel.lse_max_abs)},
                      {"kl_mean", json_number(p.kernel.kl_mean)},
                      {"top1", json_number(p.kernel.top1)},
                      {"nan_count", p.kernel.nan_count},
                      {"ratio_to_naive", json_number(p.ratio_to_naive)},
                      {"kernel", to_json(p.kernel)},
                      {"naive", to_json(p.naive)},
                      {"seconds", {{"kernel", p.seconds_kernel}, {"reference", p.seconds_reference}}}};
  if (p.end_to_end) j["end_to_end"] = to_json(*p.end_to_end);
  return j;
}

nlohmann::json to_json(const softmax_sweep& s) {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : s.points) {
    auto j = to_json(p);
    if (s.chunk > 0) j["vocab_mod_chunk"] = p.vocab % s.chunk;
    pts.push_back(std::move(j));
  }
  nlohmann::json br = nlohmann::json::array();
  for (const auto& b : s.breaches)
    br.push_back({{"vocab", b.vocab}, {"bound", b.bound}, {"measured", json_number(b.measured)}});
  return {{"kernel", s.kernel},
          {"chunk", s.chunk},
          {"points", pts},
          {"growth",
           {{"slope", json_number(s.growth.slope)},
            {"slope_stderr", json_number(s.growth.slope_stderr)},
            {"points", s.growth.points},
            {"threshold", metrics::k_growth_slope_threshold},
            {"x", "chunks"},
            {"y", "p_rel_rms"},
            {"verdict", s.growth.verdict}}},
          {"nan_points", s.nan_points},
          {"breaches", br},
          {"seconds", s.seconds}};
}

}  // namespace numprobe::probes
