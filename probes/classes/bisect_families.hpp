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
  double bias = 0.0;         // signed bias of O along the reference (bisect_step::bias)
  double lse_max_abs = 0.0;  // the LSE's max abs error (inf: the kernel wrote none)
};

// Mass lost from the numerator only: O biased low by >= 5% (a correctly normalized kernel's
// bias is a few roundings of V, << 5%) while the LSE, from l, stays within 0.05 nats (fp32 l,
// an LSE written in bf16 at |lse| ~ 5 has spacing 0.03); an unknown LSE does not count against.
// The audit's fp8 rule (audit_fp8_class.cpp).
[[nodiscard]] bool numerator_only_loss(const probe_outcome& o);

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

// One flat-logits row length of the wavefront probe.
struct lane_probe {
  std::int64_t seq = 0;
  probe_outcome outcome;
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
  // Flat logits (one key repeated): the row max is set by the first key and never rises, so no
  // rescale happens; the second control of the rescale probe (a bug that fails here does not
  // need a rising max).
  probe_outcome flat;
  probe_outcome diffuse;
  std::int64_t diffuse_length = 0;  // where `diffuse` ran (`length` unless told otherwise)
  std::vector<std::int64_t> diffuse_lengths;
  std::vector<double> diffuse_errors;  // rel_rms vs length when diffuse fails
  double diffuse_slope = 0.0;          // d log(rel_rms) / d log(S)
  std::vector<double> diffuse_ratios;  // ratio_to_naive at the same lengths
  double diffuse_ratio_slope = 0.0;    // d log(ratio_to_naive) / d log(S): the dimensionless error
  // Growth under the audit's rule (low-precision accumulation): the error at `length` at least 4x
  // that of the shortest growth length along a positive ratio slope, or a steady ratio slope
  // (>= 0.25, 3 standard errors above 0) with a 2x rise. Basis: healthy kernels' ratio slopes
  // stay under 0.05 (docs/measurements/growth_false_alarms_2026-12-01.txt).
  bool diffuse_grows = false;
  double diffuse_rise = 0.0;                // max of the ratio's and rel_rms's rise over the lengths
  double diffuse_ratio_slope_stderr = 0.0;  // of the ratio's log-log fit
  // Wavefront width: flat logits over S <= 32 keys (a 32-lane reduction tree holds every key)
  // against S = 33..65 (the upper half of a 64-wide tree; S = 64 is a whole tile, so a tail-tile
  // bug holds there), mask none.
  std::vector<lane_probe> narrow_rows, wide_rows;
  // fp8 scaling inside an opaque kernel: an attention sink (every key but the first at P ~ 1e-4
  // of the max, V of mean 1), 64 query rows, at max(length, 4096) keys. P quantized to fp8 for
  // P.V while l sums the unquantized P biases O low with an exact LSE (the audit's probe).
  probe_outcome sink;
  probe_outcome constant_v_grouped, constant_v_ungrouped;
  std::vector<shift_probe> shifts;
  std::vector<mask_pair> masks;  // T != S both alignments, window edges
  probe_outcome masked_rows;     // T > S causal: rows with no visible key
};

// Small-head version of the case under test for family runs.
[[nodiscard]] attention_case reduced_case(const attention_case& c);
// reduced_case(base) at `seq` keys and `queries` rows (0: T = S), inputs `d`, mask `m`, and
// nothing else: no window, ranges or softcap. Every probe case of bisect, audit and tile
// inference starts here.
[[nodiscard]] attention_case plain_case(const attention_case& base, std::int64_t seq, std::int64_t queries,
                                        input_dist d, mask_kind m);

// A family case: `base` with small heads at `length` keys under distribution `d`, mask `m`, no
// window, ranges or softcap; T = S, or the case's T (1..8) when it runs as split-KV decode.
// Without a mask, T = min(S, 256): every row sees every key, the classes here act along the keys
// of a row, and a NumPy kernel at S = 32K with T = S takes minutes.
inline constexpr std::int64_t k_family_rows = 256;
[[nodiscard]] attention_case family_case(const attention_case& base, std::int64_t length, input_dist d,
                                         mask_kind m, bool decode = false);

[[nodiscard]] probe_outcome measure(bisect_context& ctx, const std::string& stage,
                                    const attention_case& c, const provider_options& po,
                                    const std::string& change);

// Runs every family probe at `length` (a multiple of every tile tried, so tail tiles are quiet).
// `diffuse_length` > 0: the diffuse probe and its growth lengths end there instead (bisect: the
// length where diffuse rows exposed a failure the case under test does not show, so the evidence
// is the failure found, not a nearby length where a noisy error may dip under the bound).
[[nodiscard]] family_evidence run_families(bisect_context& ctx, const attention_case& base,
                                           std::int64_t length, std::int64_t tile,
                                           std::int64_t diffuse_length = 0);

}  // namespace numprobe::probes
