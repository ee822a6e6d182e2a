#pragma once
// KL by position: the kl probe's per-row KL grouped into position bins, with a growth fit, so
// long-context drift (a kernel that is fine at 512 tokens and drifts at 8K) shows up in KL.
//
// Rows are positions in sequence order. With seq_len L the rows hold N / L sequences of L
// positions each, and row r is position r % L. B bins split the P positions (P = L, or N
// without seq_len) into contiguous ranges: bin b holds positions
// [floor(b P / B), floor((b + 1) P / B) - 1], so every bin is non-empty when B <= P and bin
// sizes differ by at most one position.
//
// Per bin: the row count, KL mean with its standard error, and p99 (llama.cpp's interpolated
// percentile, the definition of kld.p99). The fit is ordinary least squares of the bin means
// against the bin centres (lo + hi) / 2, and separately against log2(centre + 1) (+1 so that
// position 0 is finite). `grows` is the verdict the view prints: at least 3 bins, a positive
// slope, and a slope t statistic (slope / its OLS standard error, from the residual scatter
// of the bin means about the line, B - 2 degrees of freedom) of at least 3. Under flat noise
// the t statistic is Student-t with B - 2 degrees of freedom, so |t| >= 3 is rare (p < 0.01 for
// B >= 10); a real growth that the bins resolve gives a t far above it.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "numprobe/metrics/kl.hpp"

namespace numprobe::probes {

struct kl_position_bin {
  std::int64_t lo = 0, hi = 0;  // first and last position, inclusive
  std::int64_t rows = 0;
  double kld_mean = 0.0, kld_stderr = 0.0, kld_p99 = 0.0;
};

struct kl_position_fit {
  double slope_per_1k = 0.0;  // nats per 1000 positions (NaN with fewer than 2 bins)
  double slope_t = 0.0;       // slope / standard error (NaN with fewer than 3 bins; inf on a perfect line)
  double r2 = 0.0;            // of the linear fit; 0 when every bin mean is the same
  double log2_slope = 0.0;    // nats per doubling of (position + 1)
  double log2_r2 = 0.0;
  double last_over_first = 0.0;  // last bin's KL mean / first bin's
  bool grows = false;
};

struct kl_positions {
  std::int64_t bins_asked = 0;  // --positions; 0: not asked, nothing below is filled
  std::int64_t seq_len = 0;     // --seq-len; 0: the rows are one sequence
  std::int64_t sequences = 1;
  std::vector<kl_position_bin> bins;
  kl_position_fit fit;
};

// Checks --positions (0: off) and --seq-len (0: one sequence) against the row count before any
// work is done. Throws an input error (exit 2) naming the flag: a negative value, more bins
// than positions, rows not a multiple of seq_len, seq_len without positions.
void check_position_flags(std::int64_t positions, std::int64_t seq_len, std::int64_t rows);

// Bins the per-row KL (rows in sequence order) and fits the growth.
[[nodiscard]] kl_positions kl_by_position(std::span<const metrics::kl_row> rows, std::int64_t bins,
                                          std::int64_t seq_len);

// positions.last_over_first, positions.slope_per_1k, positions.log2_slope, positions.r2;
// nullopt for a name outside "positions.". Throws an input error naming --bound on an unknown
// positions.* name, or on any of them when no bins were asked for.
[[nodiscard]] std::optional<double> position_metric(const kl_positions& p, const std::string& name);

// {bins_asked, seq_len, sequences, bins[{lo, hi, rows, kld_mean, kld_stderr, kld_p99}],
//  fit{slope_per_1k, slope_t, r2, log2_slope, log2_r2, last_over_first, grows}}.
[[nodiscard]] nlohmann::json to_json(const kl_positions& p);

}  // namespace numprobe::probes
