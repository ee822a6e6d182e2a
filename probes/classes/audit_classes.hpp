#pragma once
// The bug classes of `numprobe audit` and bisect's class sweep (NUMERICS.md, "Real bug classes"):
// each class's cheapest discriminating probe against a control that differs only in the
// mechanism under suspicion, and the plain-case baseline before them. Shared by the audit and
// bisect families; every measurement is a step of a bisect_context trace.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/bound.hpp"
#include "probes/classes/bisect_trace.hpp"

namespace numprobe::probes {

// A class's verdict: "pass" (at least one discriminating probe and its control were measured and
// the kernel held), "fail" (the probe breaks the bound where the control does not),
// "inconclusive" (no probe was measured with its control: cases crashed, timed out or returned
// bad output; the evidence names them), "not-applicable" (the class cannot occur in this kind
// of case, e.g. sub-byte formats in an attention kernel, or the kernel declared every case
// that would show it unsupported).
struct audit_class {
  std::string name;     // the class's name in NUMERICS.md
  std::string verdict;  // pass | fail | inconclusive | not-applicable
  std::vector<std::string> evidence;  // measured against bound, and the contrasting case
  std::vector<std::string> cases;     // case ids of the probes and controls (trace order)
  std::vector<int> steps;             // their trace indices
};

// A case whose backend failed (crash, timeout, unreadable output): recorded, the audit goes on.
struct audit_error {
  std::string klass;
  std::string case_id;
  std::string message;
};

// The plain case at a few tile-crossing lengths against the bound, before any contrast: a
// kernel that breaks its bound everywhere is a finding in itself (exit 1), and its classes are
// then judged against its own error level (`relative_bound`), not the absolute bound.
struct audit_baseline_point {
  std::string case_id;
  std::int64_t seq = 0;
  double value = 0.0;  // the bound's metric
  std::string verdict;  // holds | breaks | NaN/Inf | error | unsupported
  std::string message;  // the error or the refusal
  int step = -1;
};

struct audit_baseline {
  std::vector<audit_baseline_point> points;
  std::string verdict;         // pass | fail | inconclusive
  bool wrong_everywhere = false;  // every measured length breaks the bound
  std::string worst_case;
  double worst_value = 0.0;
  std::string relative_bound;  // the bound the classes were judged against again ("" if not)
  std::optional<bound> relative;  // twice the worst baseline error, when wrong everywhere
};

// The class sweep alone on an existing context (bisect runs it on a case that passes).
// `tile_k`/`tile_q` 0: unknown (probes cross every common tile size).
[[nodiscard]] std::vector<audit_class> run_audit_classes(bisect_context& ctx, const attention_case& base,
                                                         std::int64_t seq_hi, bool quick, std::int64_t tile_q,
                                                         std::int64_t tile_k, std::vector<audit_error>& errors,
                                                         std::vector<audit_error>& refusals,
                                                         const std::function<bool(std::size_t)>& only = {});
// The number of classes run_audit_classes returns (`only` takes their indices: `audit --mpi`
// measures a share of them; the classes left out come back not-applicable, unmeasured).
[[nodiscard]] std::size_t audit_class_count();

// The baseline of run_audit on an existing context (see audit_baseline).
[[nodiscard]] audit_baseline run_audit_baseline(bisect_context& ctx, const attention_case& base, std::int64_t tile_q,
                                                std::int64_t tile_k, std::vector<audit_error>& errors,
                                                std::vector<audit_error>& refusals);

// The failing classes' names.
[[nodiscard]] std::vector<std::string> failing_classes(const std::vector<audit_class>& classes);

[[nodiscard]] nlohmann::json to_json(const audit_class& c);
[[nodiscard]] nlohmann::json to_json(const audit_baseline& b);

}  // namespace numprobe::probes
