#pragma once
// `numprobe audit` (issue 14): every bug class of NUMERICS.md ("Real bug classes") checked
// against one kernel, whether or not its default case fails. For each class the cheapest
// discriminating probe runs at lengths that cross the kernel's tiles (known, inferred, or every
// common tile size), against a control that differs only in the mechanism under suspicion; where
// the backend exposes its mechanisms (the emulator) the mechanism is disabled as bisect does.
// Every measurement is a step of the same re-runnable trace as bisect's.
#include <cstdint>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/bound.hpp"
#include "probes/classes/audit_classes.hpp"
#include "src/core/rank_share.hpp"
#include "probes/classes/bisect_trace.hpp"
#include "probes/tiles/tile_inference.hpp"

namespace numprobe::probes {

struct audit_options {
  attention_case base;            // heads, head_dim, dtype, seed of the case under test
  std::int64_t seq_hi = 8192;     // longest length of the length-driven probes (`--seq N`)
  bool quick = false;             // fewer lengths (`--quick`)
  provider_options provider;
  std::vector<bound> bounds;      // default: ratio_to_naive<=2 (FlashAttention's criterion)
  attention_probe_options probe;  // sampled rows; end-to-end off (audit judges the kernel)
  std::function<void(const bisect_step&)> on_step;
  std::function<bool()> stop;  // polled between cases: true once interrupted (a partial report)
  // `--mpi`: each rank measures a share of the classes (the baseline is item 0, the classes
  // 1..N), the ranks exchange their measurements, and every rank then judges the whole audit
  // from them: the trace, the evidence and the verdicts are the single-process run's.
  rank_share share;
};

struct audit_result {
  std::string provider;
  nlohmann::json provider_metadata;
  std::string base_case;
  std::vector<std::string> bounds;
  tile_shape tiles;             // the kernel's own tiles ({0,0}: opaque)
  tile_inference inferred;      // inference for opaque kernels (not run when tiles are known)
  std::int64_t tile_k = 0;      // the key tile the probes were laid out for (0: common sizes)
  std::int64_t tile_q = 0;
  std::string tile_source;      // kernel | --tile | inferred | common sizes
  audit_baseline baseline;
  std::vector<audit_class> classes;
  std::vector<audit_error> errors;
  std::vector<audit_error> unsupported;  // cases the kernel refused (a declared lack of support)
  bool healthy = true;          // the baseline holds, no class fails and no case errored
  std::int64_t seq_asked = 0;   // --seq: the longest length asked for
  std::int64_t seq_longest = 0; // the longest length measured (above seq_asked when the
                                // probes need longer lengths to cross the tiles: said so)
  std::vector<bisect_step> trace;
  double seconds = 0.0;
};

[[nodiscard]] audit_result run_audit(const audit_options& o);

// The audit's exit code (`numprobe audit`, numprobe.audit): a failing class or a failing
// baseline is a finding (1); otherwise a class left inconclusive by a case the backend could
// not run (a crash, a timeout, bad output) makes the audit incomplete (3); a kernel that refused
// every case (nothing judged, nothing crashed) gives 2, since no evidence is never a pass; else
// 0. Refused cases are declared unsupported, not errors: they never make the exit code 3.
[[nodiscard]] int audit_exit_code(const audit_result& r);

[[nodiscard]] nlohmann::json to_json(const audit_result& r, bool with_seconds = true);
// The result model: a gate per applicable class (held unless it fails), the classes and errors
// as tables, every case as the trace, and to_json(r) as details.
void fill_result(const audit_result& r, result::check_result& out);

}  // namespace numprobe::probes
