#pragma once
// `numprobe bisect` (issue 5): localize an accuracy failure by length, tell the bug classes
// apart with targeted inputs, and (where the kernel's state is visible) name the state held in
// the wrong precision. Every measurement is a step of a deterministic, re-runnable trace.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "probes/classes/audit_classes.hpp"
#include "probes/bisect/bisect_classify.hpp"
#include "probes/bisect/bisect_decode.hpp"
#include "probes/classes/bisect_fp8.hpp"

namespace numprobe::probes {

struct bisect_options {
  attention_case base;            // the case under test; seq is replaced per step
  std::int64_t seq_lo = 64;
  std::int64_t seq_hi = 16384;
  provider_options provider;
  std::vector<bound> bounds;      // default: ratio_to_naive<=2 (FlashAttention's criterion)
  attention_probe_options probe;  // sampled rows; end-to-end off (bisect judges the kernel)
  std::function<void(const bisect_step&)> on_step;
};

// A case under test that holds at every length can still fail under inputs that expose a class
// its own inputs cannot show (near-uniform rows for a running sum held short): bisect then
// proceeds from the first such family that fails at the longest length.
struct exposing_family {
  bool tried = false;          // the case under test passed everywhere and families were tried
  std::vector<std::string> tried_labels;
  std::string label;           // the family that failed ("" when none did)
  std::string case_id;         // the family case at the longest length
  std::int64_t seq = 0;
  std::size_t step = 0;        // its trace step
};

struct bisect_result {
  std::string provider;
  nlohmann::json provider_metadata;
  std::string base_case;
  std::vector<std::string> bounds;
  bool failure_found = false;
  exposing_family exposed;  // the failure appeared only under this family (label non-empty)
  length_result length;
  tile_inference inferred_tile;  // opaque kernels: the key tile inferred for the boundary step
  std::int64_t discrimination_length = 0;
  family_evidence families;
  precision_result precision;
  std::vector<mechanism_check> mechanisms;
  fp8_points_result fp8;  // fp8 cases: which quantization point breaks the bound
  decode_checks decode;   // split-KV decode cases: single split, split/page sweeps
  std::vector<class_finding> classes;
  // A case that passes at every length: the audit's class sweep (probe against control per
  // class); a failing class is then the classification, and bisect exits 1.
  bool family_sweep_ran = false;
  std::vector<audit_class> family_sweep;
  std::string classification = "no failure";
  std::vector<std::string> candidates;  // supported classes
  std::vector<bisect_step> trace;
  double seconds = 0.0;
};


[[nodiscard]] bisect_result run_bisect(const bisect_options& o);

// `trace[]`, `classification`, `culprit`, `first_failing_seq`, `tile_aligned`, ... (the caller
// adds the envelope). `with_seconds` false drops timings (for comparing two runs).
[[nodiscard]] nlohmann::json to_json(const bisect_result& r, bool with_seconds = true);
// A Markdown report: summary, classes with evidence, precision curve, the trace.
// The result model: the verdict, the length bracket, the failure gate, the trace as a table,
// and to_json(r) as details.
void fill_result(const bisect_result& r, const bisect_options& o, result::check_result& out);
// One-line summaries for terminals and reports.
[[nodiscard]] std::string culprit_text(const bisect_result& r);

}  // namespace numprobe::probes
