#pragma once
// One attention case on a provider against the reference: kernel-induced error (reference on
// the same rounded inputs), end-to-end error (reference on the unrounded inputs), and the
// same-precision naive baseline that makes the error dimensionless.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "numprobe/core/row_sampling.hpp"
#include "numprobe/metrics/attention_errors.hpp"
#include "src/core/wire.hpp"
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

// Where a non-finite (row, head) sits in the case's mask geometry: each kind points at a
// different missing guard, so the report names it.
enum class nonfinite_row_kind : std::uint8_t {
  m_fully_masked,  // the row sees no key: an empty-row guard is missing (0/0, -inf - -inf)
  m_window_edge,   // the row's keys start after key 0: a window's (or range's) lower edge cuts them
  m_ordinary,      // the row sees keys from key 0 on
};
[[nodiscard]] std::string_view to_string(nonfinite_row_kind k);  // fully-masked, window-edge, ordinary
// Query `query` of batch member `member` (its own keys in a ragged batch; member 0 by default).
[[nodiscard]] nonfinite_row_kind classify_row(const attention_case& c, std::int64_t member, std::int64_t query);
[[nodiscard]] inline nonfinite_row_kind classify_row(const attention_case& c, std::int64_t query) {
  return classify_row(c, 0, query);
}

struct nonfinite_row {
  std::int64_t row = 0;      // flat row b*T + t
  std::int64_t batch = 0;
  std::int64_t query = 0;    // t
  std::int64_t head = 0;
  nonfinite_row_kind kind = nonfinite_row_kind::m_ordinary;
  std::int64_t key_begin = 0, key_end = 0;  // the row's visible keys [begin, end)
  std::int64_t o_nan = 0, o_inf = 0;       // non-finite elements of O in this (row, head)
  double lse = 0.0;                         // the candidate's LSE (may be NaN or +-inf)
  bool lse_finding = false;                 // that LSE is NaN, +inf, or -inf with keys visible
};

// The NaN/Inf findings of a candidate (kernel vs reference on the same inputs), O and LSE.
struct nonfinite_report {
  static constexpr std::size_t k_first = 8;  // offending (row, head) pairs listed
  std::int64_t nan = 0, inf = 0;             // elements of O
  std::int64_t lse_nan = 0, lse_inf = 0;     // (row, head) LSE values
  // Distinct offending flat rows by kind (a row counts once, whatever its heads).
  std::int64_t rows_fully_masked = 0, rows_window_edge = 0, rows_ordinary = 0;
  // Rows outside the sampled ones that hold some (kernels that compute every row report them;
  // the counts above include their values, the row kinds and `first` cover sampled rows only).
  std::int64_t rows_unsampled = 0;
  std::vector<nonfinite_row> first;          // the first offending (row, head), output order
  [[nodiscard]] std::int64_t total() const { return nan + inf + lse_nan + lse_inf; }
  // One line: "12 NaN in O (rows: 3 fully masked, 0 window edge, 0 ordinary), first at row 0
  // head 1 (...)"; empty when there is nothing to report.
  [[nodiscard]] std::string summary() const;
};

[[nodiscard]] nonfinite_report make_nonfinite_report(const metrics::attention_errors& e,
                                                     const attention_case& c);

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
  nonfinite_report nonfinite;        // NaN/Inf in the candidate (from `kernel`)
  double seconds_inputs = 0, seconds_kernel = 0, seconds_reference = 0, seconds_naive = 0;

  // The value of a named metric of this point, for bounds: rel_rms, max_abs, max_rel, max_ulp,
  // lse_max_abs, ratio_to_naive, nan_count, inf_count (O), lse_nan_count, lse_inf_count,
  // nonfinite (all four), e2e.rel_rms, naive.rel_rms.
  [[nodiscard]] std::optional<double> metric(const std::string& name) const;
  // NaN/Inf findings in O and LSE together: any of them fails the point (exit 1).
  [[nodiscard]] std::int64_t nonfinite_total() const { return kernel.nonfinite_total(); }
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

// A point as bytes and back, exactly (`--mpi` ranks hand their points to one another: the merged
// report is the single-process one, bit for bit; src/core/wire.hpp).
void write_wire(wire::writer& w, const attention_point& p);
void read_wire(wire::reader& r, attention_point& p);

// Bound metric names a point understands (for error messages).
[[nodiscard]] const std::vector<std::string>& point_metric_names();

[[nodiscard]] nlohmann::json to_json(const metrics::attention_errors& e);
[[nodiscard]] nlohmann::json to_json(const nonfinite_report& r);
[[nodiscard]] nlohmann::json to_json(const attention_point& p);

// A JSON number, or the schema's spelling of a non-finite value (numprobe/core/result.hpp).
using result::json_number;

}  // namespace numprobe::probes
