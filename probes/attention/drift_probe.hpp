#pragma once
// Error against sequence length, tile-boundary aware, with a growth fit (issue 2, `drift`).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "numprobe/metrics/growth_fit.hpp"
#include "src/core/rank_share.hpp"
#include "probes/point/attention_probe.hpp"
#include "probes/tiles/tile_inference.hpp"
#include "probes/tiles/tile_lengths.hpp"

namespace numprobe::probes {

struct drift_options {
  attention_case base;        // seq is replaced per point; queries 0 means T = S per point
  std::int64_t seq_lo = 128;
  std::int64_t seq_hi = 8192;
  std::string points = "tile";
  attention_probe_options probe;
  std::vector<bound> bounds;  // point bounds and growth.slope
  // Called after each point (progress bars); may be empty.
  std::function<void(std::size_t done, std::size_t total, std::int64_t seq)> on_point;
  // Polled before each point: true once the command was interrupted (SIGINT/SIGTERM). The sweep
  // then stops, and the result holds the points measured (`incomplete`, a partial report).
  std::function<bool()> stop;
  // `--mpi`: this rank measures the lengths of its share; every rank then holds every point, in
  // length order, and the result is the single-process result.
  rank_share share;
};

struct drift_breach {
  std::int64_t seq = 0;
  std::string bound;
  double measured = 0.0;
  std::int64_t splits = 0, page_size = 0;  // decode sweeps: the series it belongs to (0: n/a)
};

// Decode sweeps (issue 9): one length sweep per (split count, page size) combination.
struct drift_series {
  std::int64_t splits = 0;     // 0: the provider's own setting
  std::int64_t page_size = 0;  // 0: the provider's own setting
  std::string provider;
  metrics::growth_fit growth;
  std::size_t points = 0;
  std::int64_t nan_points = 0;
  std::size_t breaches = 0;
  double worst_rel_rms = 0.0;
  std::int64_t worst_seq = 0;
  std::string tile_pattern = "none";
  bool pass = true;
};

// A point whose backend failed (exec command crashed, timed out, wrote garbage...): recorded,
// and the sweep goes on with the other points.
struct drift_point_error {
  std::int64_t seq = 0;
  std::string case_id;
  std::string message;
};

struct drift_result {
  std::string provider;
  tile_shape tiles;
  // Opaque kernels under `--points tile`: the tile inferred from cheap cases (issue 14). Its k
  // chose the lengths when known; else the lengths cross every common tile size.
  tile_inference inferred_tile;
  std::vector<attention_point> points;
  metrics::growth_fit growth;
  std::vector<drift_breach> breaches;  // point and growth breaches of the bounds
  std::vector<drift_point_error> point_errors;  // backend failures (exit 3), other points ran
  // Points the kernel refused (unsupported_case: exit 77, UNSUPPORTED, NotImplementedError, a
  // plugin's STATUS_UNSUPPORTED): listed and skipped, not errors; message is the reason.
  std::vector<drift_point_error> unsupported_points;
  std::int64_t nan_points = 0;
  // Where the breaching points sit relative to the key tile: "none", "multiples" (all at
  // S = k*Bk), "non-multiples" (all at S != k*Bk: partial tail tiles), "mixed", "unknown-tile".
  std::string tile_pattern = "none";
  bool gated_breach = false;  // a --bound was breached (exit 1)
  bool incomplete = false;    // interrupted: `lengths_planned` were planned, `points` measured
  std::size_t lengths_planned = 0;
  double seconds = 0.0;
  // Decode sweeps only: the series, and for each point the index of its series.
  std::vector<drift_series> series;
  std::vector<std::size_t> point_series;
};

[[nodiscard]] drift_result run_drift(attention_provider& provider, const drift_options& opts);

// `drift --decode` with lists: the length sweep once per (splits, page size) combination, on
// the provider `po` with those knobs set (an empty list keeps the provider's own setting).
// Points carry their series; the growth reported is the steepest series' fit; the tile pattern
// is the series' common pattern, or "mixed".
[[nodiscard]] drift_result run_drift_decode_sweep(const provider_options& po,
                                                  const std::vector<std::int64_t>& splits,
                                                  const std::vector<std::int64_t>& page_sizes,
                                                  const drift_options& opts);

[[nodiscard]] nlohmann::json to_json(const drift_result& r);

// The result model of a sweep (every command and scenario check renders through it): growth
// metrics, one gate per bound (worst point), the error and ratio curves with the key-tile
// boundaries, the points table, the full-precision data table (CSV) and to_json(r) as details.
void fill_result(const drift_result& r, const drift_options& o, result::check_result& out);

// A drift command's document, for every front end (`numprobe drift`, numprobe.drift in Python):
// fill_result plus the backend's name and metadata, the base case, the bounds and the verdict.
// Returns the command's exit code: 3 when a point's backend failed (above a breach), 1 for a
// breach or a NaN point, else 0.
[[nodiscard]] int fill_command_result(const drift_result& r, const drift_options& o,
                                      const attention_provider& provider, result::check_result& out);

}  // namespace numprobe::probes
