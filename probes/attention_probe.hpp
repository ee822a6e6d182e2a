#pragma once
// One attention case on a provider against the reference: kernel-induced error (reference on
// the same rounded inputs), end-to-end error (reference on the unrounded inputs), and the
// same-precision naive baseline that makes the error dimensionless.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/row_sampling.hpp"
#include "numprobe/metrics/attention_errors.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::probes {

struct worst_row {
  std::int64_t row = 0;      // flat row
  std::int64_t batch = 0;
  std::int64_t query = 0;    // t
  std::int64_t head = 0;
  std::int64_t query_tile = -1;  // t / Bq (-1 for opaque kernels)
  std::int64_t key_tile = -1;    // tile holding the row's last visible key
  std::int64_t keys = 0;         // visible keys of the row
  double rel_rms = 0.0;
  double max_abs = 0.0;
  double lse_abs = 0.0;
};

struct attention_point {
  std::string case_id;
  std::int64_t seq = 0;
  std::int64_t queries = 0;
  std::int64_t rows_evaluated = 0;   // sampled query positions (x heads for row-heads)
  metrics::attention_errors kernel;  // vs reference on the same rounded inputs
  metrics::attention_errors naive;   // naive same-precision baseline vs the same reference
  std::optional<metrics::attention_errors> end_to_end;  // vs reference on unrounded inputs
  double ratio_to_naive = 0.0;       // kernel.rel_rms / naive.rel_rms
  std::vector<worst_row> worst;
  double seconds_inputs = 0, seconds_kernel = 0, seconds_reference = 0, seconds_naive = 0;

  // The value of a named metric of this point, for bounds: rel_rms, max_abs, max_rel, max_ulp,
  // lse_max_abs, ratio_to_naive, nan_count, inf_count, e2e.rel_rms, naive.rel_rms.
  [[nodiscard]] std::optional<double> metric(const std::string& name) const;
};

struct attention_probe_options {
  row_sampling sampling;  // tile_q/tile_k are overwritten from the provider's tiles when known
  bool end_to_end = true;
  std::size_t worst = 5;
  // When set, K/V are taken as the prefix of these inputs (same generated case, longer S)
  // instead of being generated again: sweeps generate once at their longest length.
  const attention_inputs* prefix_source = nullptr;
  // When set, these inputs are used exactly as they are (tensors read from files: `attention
  // --inputs DIR`); their case must be the case of the point.
  const attention_inputs* inputs = nullptr;
};

[[nodiscard]] attention_point run_attention_point(attention_provider& provider,
                                                  const attention_case& c,
                                                  const attention_probe_options& opts);

// Bound metric names a point understands (for error messages).
[[nodiscard]] const std::vector<std::string>& point_metric_names();

[[nodiscard]] nlohmann::json to_json(const metrics::attention_errors& e);
[[nodiscard]] nlohmann::json to_json(const attention_point& p);

// JSON number or null for non-finite values (JSON has no inf/NaN).
[[nodiscard]] nlohmann::json json_number(double v);

}  // namespace numprobe::probes
