#pragma once
// Split-KV decode checks for bisect (issue 9): the single-split disable-the-mechanism check
// (the failing case re-run with one split: if the failure disappears, the split/merge carries
// it), a sweep of the split count and of the page size at the failing length, and lengths
// k*P-1, k*P, k*P+1 around the page size P. Used when the case runs with the `decode` knob.
#include <cstdint>
#include <string>
#include <vector>

#include "probes/classes/bisect_precision.hpp"

namespace numprobe::probes {

struct decode_sweep_point {
  std::int64_t value = 0;  // splits, page size, or length
  probe_outcome outcome;
};

struct decode_checks : recheck_header {
  std::int64_t splits = 0;  // the case's split count (0: set by split size)
  std::int64_t page_size = 0;
  mechanism_check single_split;
  std::vector<decode_sweep_point> split_sweep;  // split counts 1, 2, 4, 8, 16
  std::vector<decode_sweep_point> page_sweep;   // page sizes 1, 16, 64, 256
  std::vector<decode_sweep_point> page_edges;   // lengths around multiples of the page size
  bool split_dependent = false;  // passes with some split count and fails with another
  bool page_dependent = false;   // likewise for the page size
  bool all_empty_nan = false;    // NaN only in rows whose every split is empty (families)
  // The merge fault the evidence names: "merge-nan-empty", "lse-base2-merge",
  // "split-tail-drop", or "" when the evidence fits none of them.
  std::string merge_fault;
  std::string text;
};

// `c` fails on ctx's base provider with `before` (a decode case).
// `fam`: the family probes already run (their all-empty-rows probe names merge-nan-empty).
[[nodiscard]] decode_checks run_decode_checks(bisect_context& ctx, const attention_case& c,
                                              const probe_outcome& before, std::int64_t tile_k,
                                              const family_evidence& fam);

}  // namespace numprobe::probes
