#pragma once
// FP8 quantization-point separation (issue 9): an fp8 attention kernel quantizes at three
// points (NUMERICS.md, "FP8 attention has three quantization points"): K/V in the cache, P
// before P.V, and the fp8 MMA accumulator. When the case under test uses any of them (emu
// knobs kv-format, p-format, acc-promote), bisect re-runs the failing case with each point
// restored to high precision alone (K/V in the input dtype, P unquantized, the accumulator
// promoted to fp32 after every key tile), then in sets, and names the point(s) whose
// restoration removes the failure.
#include <cstdint>
#include <string>
#include <vector>

#include "probes/classes/bisect_families.hpp"

namespace numprobe::probes {

struct fp8_restoration {
  std::vector<std::string> points;  // kv | p | acc, restored together
  std::string change;               // what the restoration does
  bool removes = false;             // the bound holds and the error at least halves
  probe_outcome outcome;
};

struct fp8_points_result : recheck_header {
  std::vector<std::string> active;   // the points the case quantizes
  probe_outcome before;              // as configured (fails)
  std::vector<fp8_restoration> restorations;  // singles first, then sets
  // one: a single restoration removes the failure; all: only restoring the culprit points
  // together does (they add up); ambiguous: several single restorations each remove it;
  // partial: nothing removes it, but restoring the culprit points cuts the error 10x or more
  // (another cause remains); none: restoring every point leaves the failure (not an fp8
  // quantization failure).
  std::string verdict;
  std::vector<std::string> culprit;
  std::string text;
  bool rest_restored = false;  // later stages ran with the culprit points restored
};

// The fp8 points that the provider options switch on (empty: not an fp8 case).
[[nodiscard]] std::vector<std::string> active_fp8_points(const provider_options& po);

// The default accuracy gate of attention, drift and audit when no --bound is given:
// ratio_to_naive<=2 (FlashAttention's test criterion), or, for cases with fp8 points
// (--kv-format, --p-format, --acc-promote), twice the fp8 format's unit roundoff on rel_rms.
// docs/bounds.md gives the basis.
[[nodiscard]] bound default_accuracy_bound(const provider_options& po);
// The provider options with `points` restored to high precision (and their faults removed:
// a fault of a point that no longer exists is meaningless and rejected by the backend).
[[nodiscard]] provider_options restore_fp8_points(const provider_options& po,
                                                  const std::vector<std::string>& points);
// What the point is, for reports: "K/V cache (e4m3fn, scale per head)".
[[nodiscard]] std::string fp8_point_meaning(const std::string& point, const provider_options& po);

// `c` must fail on ctx's base provider with `before`.
[[nodiscard]] fp8_points_result separate_fp8_points(bisect_context& ctx, const attention_case& c,
                                                    const probe_outcome& before);

}  // namespace numprobe::probes
