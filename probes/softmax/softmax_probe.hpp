#pragma once
// One long-row softmax case on an implementation against the reference (issue 9): probability,
// log-probability, LSE and cross-entropy errors, KL divergence and top-k agreement against the
// reference distribution, the same-precision naive baseline, and a sweep over the row length
// across chunk boundaries with a growth fit.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/core/result.hpp"
#include "numprobe/core/bound.hpp"
#include "numprobe/metrics/growth_fit.hpp"
#include "numprobe/reference/softmax.hpp"
#include "src/providers/softmax_provider.hpp"

namespace numprobe::probes {

// The implementation under test is a softmax_provider (src/providers/softmax_provider.hpp:
// ref, emu, cuda, exec:CMD, exec-worker:CMD), made by make_softmax_provider.

struct softmax_errors {
  std::int64_t elements = 0;
  std::int64_t nan_count = 0;  // NaN in p, log p, LSE or cross-entropy
  std::int64_t inf_count = 0;  // +-inf (or -inf log p / LSE) where the reference is finite
  double p_rel_rms = 0.0;      // ||p - p_ref|| / ||p_ref|| over all rows
  double p_max_abs = 0.0;
  double p_max_rel = 0.0;      // |p - p_ref| / max(p_ref, 1e-3 / V)
  double logp_max_abs = 0.0;   // over entries where the reference is finite
  double lse_max_abs = 0.0;
  double ce_max_abs = 0.0;
  double kl_mean = 0.0;        // KL(ref || candidate) per row, from the candidate's log p
  double kl_max = 0.0;
  double top1 = 1.0;           // fraction of rows whose argmax agrees
  double topk_overlap = 1.0;   // mean |top-k(ref) n top-k(cand)| / k
};

[[nodiscard]] softmax_errors compare_softmax(const softmax_output& cand, const softmax_output& ref, int topk);

// Half of torch.testing.assert_close's float32 rtol (1.3e-6). A healthy fp32 softmax's
// probabilities carry 1e-7..9e-7 relative RMS error depending on the summation order (measured
// from 1k to 1M entries, docs/bounds.md), while the naive pairwise-summed one carries ~5e-8: their
// ratio is noise. Measured against this floor, a 2x gate passes fp32 rounding and still fails any
// bf16/f16 state (>= 1.5e-3).
inline constexpr double k_softmax_noise_floor = 6.5e-7;

struct softmax_point {
  std::string case_id;
  std::int64_t vocab = 0, rows = 0, chunks = 0;
  softmax_errors kernel;                  // vs reference on the same rounded logits
  softmax_errors naive;                   // naive fp32 baseline vs the same reference
  std::optional<softmax_errors> end_to_end;  // vs reference on the unrounded logits
  // kernel.p_rel_rms / max(naive.p_rel_rms, k_softmax_noise_floor): below the floor both are
  // fp32 rounding noise whose ratio says nothing (docs/bounds.md).
  double ratio_to_naive = 0.0;
  double seconds_kernel = 0.0, seconds_reference = 0.0;
  // rel_rms (= p_rel_rms), p_max_abs, p_max_rel, logp_max_abs, lse_max_abs, ce_max_abs,
  // kl_mean, kl_max, top1, topk, ratio_to_naive, nan_count, inf_count, e2e.rel_rms
  [[nodiscard]] std::optional<double> metric(const std::string& name) const;
  [[nodiscard]] bool nonfinite() const { return kernel.nan_count > 0 || kernel.inf_count > 0; }
};

struct softmax_probe_options {
  int topk = 5;
  bool end_to_end = true;
};

[[nodiscard]] softmax_point run_softmax_point(softmax_provider& k, const softmax_case& c,
                                              const softmax_probe_options& o);

struct softmax_sweep_options {
  softmax_case base;
  std::int64_t vocab_lo = 1024, vocab_hi = 262144;
  std::string points = "tile";  // tile: k*C-1, k*C, k*C+1 (C = chunk); log:N; a list
  softmax_probe_options probe;
  std::vector<bound> bounds;
  std::function<void(std::size_t, std::size_t, std::int64_t)> on_point;
};

struct softmax_sweep {
  std::string kernel;
  std::int64_t chunk = 0;
  std::vector<softmax_point> points;
  metrics::growth_fit growth;  // log p_rel_rms vs log chunks
  struct breach {
    std::int64_t vocab = 0;
    std::string bound;
    double measured = 0.0;
  };
  std::vector<breach> breaches;
  std::int64_t nan_points = 0;
  bool gated_breach = false;
  double seconds = 0.0;
};

[[nodiscard]] softmax_sweep run_softmax_sweep(softmax_provider& k, const softmax_sweep_options& o);

[[nodiscard]] const std::vector<std::string>& softmax_metric_names();
// `numprobe softmax`'s gate when no --bound is given: ratio_to_naive<=2 (docs/bounds.md).
[[nodiscard]] bound default_softmax_bound();
[[nodiscard]] nlohmann::json to_json(const softmax_errors& e);
[[nodiscard]] nlohmann::json to_json(const softmax_point& p);
[[nodiscard]] nlohmann::json to_json(const softmax_sweep& s);

// The result model of a point and of a sweep (metrics, the NaN/Inf gate, a gate per bound,
// the error curve and the points table; to_json as details). The caller sets the backend.
void fill_result(const softmax_point& p, const std::vector<bound>& bounds, result::check_result& out);
void fill_result(const softmax_sweep& r, const softmax_sweep_options& o, result::check_result& out);

}  // namespace numprobe::probes
