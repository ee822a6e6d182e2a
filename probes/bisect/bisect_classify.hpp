#pragma once
// Classification of a localized failure into the bug classes of NUMERICS.md ("Real bug
// classes"), with the evidence for and against each. A class is supported only by a contrast
// between a probe and its control; when the evidence supports two classes, both are reported and
// the classification is "ambiguous", never one confident wrong class.
#include <string>
#include <vector>

#include "probes/bisect/bisect_decode.hpp"
#include "probes/classes/bisect_families.hpp"
#include "probes/classes/bisect_fp8.hpp"
#include "probes/bisect/bisect_length.hpp"
#include "probes/classes/bisect_precision.hpp"

namespace numprobe::probes {

struct class_finding {
  std::string name;     // the class's name in NUMERICS.md
  std::string verdict;  // supported | not supported | not tested
  std::vector<std::string> evidence_for;
  std::vector<std::string> evidence_against;
};

struct classification_inputs {
  const length_result* length = nullptr;
  const family_evidence* families = nullptr;
  const precision_result* precision = nullptr;
  // The rescale contrast re-run with the precision culprit upgraded (when one was found), so a
  // second fault hidden under a precision fault still shows.
  const probe_outcome* rescale_stress_fixed = nullptr;
  const probe_outcome* max_first_fixed = nullptr;
  const probe_outcome* flat_fixed = nullptr;
  const std::vector<mechanism_check>* mechanisms = nullptr;
  bool state_knobs = false;
  const fp8_points_result* fp8 = nullptr;  // fp8 quantization-point separation
  const decode_checks* decode = nullptr;  // split-KV decode checks
};

[[nodiscard]] std::vector<class_finding> classify(const classification_inputs& in);

// "no failure", the single supported class, "ambiguous" (two or more), or "unclassified".
[[nodiscard]] std::string classification_of(bool failure_found, const std::vector<class_finding>& f);

}  // namespace numprobe::probes
