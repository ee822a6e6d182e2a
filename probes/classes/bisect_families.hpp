#pragma once
// Input-family discrimination (issue 5): the failing case re-run under inputs designed for each
// bug class of NUMERICS.md ("Real bug classes"), each paired with a control that differs only in
// the mechanism under suspicion. Small heads and head dims: no class here depends on them.
#include <cstdint>
#include <string>
#include <vector>

#include "probes/classes/bisect_trace.hpp"

namespace numprobe::probes {

struct probe_outcome {
  bool ran = false;
  bool failed = false;
  double error = 0.0;   // the gate metric
  double rel_rms = 0.0;
  double ratio = 0.0;   // ratio_to_naive
  std::int64_t nan = 0;
  std::size_t step = 0; // trace index (1-based)
};

// What every re-run of the failing case (decode checks, fp8 points) records first.
struct recheck_header {
  bool ran = false;
  std::string reason;   // why it did not run
  std::string case_id;  // the failing case it re-ran
  std::int64_t seq = 0;
};

// Starts a re-run: false (with the reason) when it does not apply or there is no failing case.
inline bool begin_recheck(recheck_header& h, const attention_case& c, const probe_outcome& before,
                          const std::string& not_applicable) {
  if (!not_applicable.empty()) {
    h.reason = not_applicable;
    return false;
  }
  if (!before.failed) {
    h.reason = "no failing case to re-run";
    return false;
  }
  h.ran = true;
  h.case_id = c.id();
  h.seq = c.seq;
  return true;
}

// A kernel-mask probe and its control: the same visible keys given as explicit ranges, which
// the kernel does not derive from the mask kind (so a mask bug shows in one and not the other,
// while bugs of the walk itself show in both).
struct mask_pair {
  std::string label;
  probe_outcome kernel_mask;
  probe_outcome explicit_ranges;
};

struct shift_probe {
  double shift = 0.0;
  probe_outcome outcome;
};

struct family_evidence {
  std::int64_t length = 0;     // discrimination length
  std::int64_t tile = 0;       // B for the window edges
  probe_outcome normal;        // N(0,1), T = S, no mask: the control of the shift probes
  probe_outcome rescale_stress, max_first;
  probe_outcome diffuse;
  std::vector<std::int64_t> diffuse_lengths;
  std::vector<double> diffuse_errors;  // rel_rms vs length when diffuse fails
  double diffuse_slope = 0.0;          // d log(rel_rms) / d log(S)
  std::vector<double> diffuse_ratios;  // ratio_to_naive at the same lengths
  double diffuse_ratio_slope = 0.0;    // d log(ratio_to_naive) / d log(S): the dimensionless error
  probe_outcome constant_v_grouped, constant_v_ungrouped;
  std::vector<shift_probe> shifts;
  std::vector<mask_pair> masks;  // T != S both alignments, window edges
  probe_outcome masked_rows;     // T > S causal: rows with no visible key
};

// Small-head version of the case under test for family runs.
[[nodiscard]] attention_case reduced_case(const attention_case& c);

[[nodiscard]] probe_outcome measure(bisect_context& ctx, const std::string& stage,
                                    const attention_case& c, const provider_options& po,
                                    const std::string& change);

// Runs every family probe at `length` (a multiple of every tile tried, so tail tiles are quiet).
[[nodiscard]] family_evidence run_families(bisect_context& ctx, const attention_case& base,
                                           std::int64_t length, std::int64_t tile);

}  // namespace numprobe::probes
