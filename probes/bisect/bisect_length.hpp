#pragma once
// Length bisection (issue 5): the smallest failing key length between a passing and a failing
// one, then lengths k*B-1, k*B, k*B+1 around it to tell whether failures sit on tile or
// power-of-two boundaries (NUMERICS.md: "paged or tail tile", "index or dispatch threshold").
#include <cstdint>
#include <string>
#include <vector>

#include "probes/classes/bisect_trace.hpp"
#include "probes/tiles/tile_inference.hpp"

namespace numprobe::probes {

struct tile_probe {
  std::int64_t seq = 0;
  std::int64_t tile = 0;  // B it was chosen for
  bool failed = false;
  double error = 0.0;     // gate metric
};

struct length_result {
  bool found = false;               // some length failed
  std::int64_t first_failing = 0;   // smallest failing length found (0: none)
  std::int64_t last_passing = 0;    // the passing length just below it (0: the lowest failed)
  bool fails_at_lowest = false;     // the lowest length tried already fails
  std::int64_t tile = 0;            // B used for the boundary analysis
  std::string tile_source;          // "kernel", "--tile", "inferred", "tried" (common tiles), "none"
  tile_inference inferred;          // opaque kernels: the inference that chose B (or "unknown")
  bool tile_aligned = false;        // failures follow k*B (or k*B+-1) consistently
  std::string tile_pattern = "none";  // non-multiples | multiples | not-aligned | none
  bool power_of_two_step = false;   // error steps up at 2^n or 2^n+1 and stays failing
  double step_factor = 1.0;         // error(first_failing) / error(last_passing)
  std::vector<tile_probe> boundary; // the k*B+-1 measurements
};

// `base` is the case under test (its seq is replaced); lengths in [lo, hi].
[[nodiscard]] length_result bisect_length(bisect_context& ctx, const attention_case& base,
                                          std::int64_t lo, std::int64_t hi);

}  // namespace numprobe::probes
