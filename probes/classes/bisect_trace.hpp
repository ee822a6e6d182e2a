#pragma once
// The bisect trace (issue 5): every measurement bisect makes is one step with its case id, what
// changed against the case under test, the measured error and the decision drawn from it. The
// context that runs the steps is shared by the stages (length, families, precision).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "numprobe/core/result.hpp"
#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/bound.hpp"
#include "probes/point/attention_probe.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::probes {

struct bisect_step {
  int index = 0;
  std::string stage;     // length | tile | family | precision | mechanism
  std::string case_id;   // rerun with `numprobe attention --case ID` plus the provider flags
  std::string change;    // what differs from the case under test
  std::string provider;  // the provider's name (tile, states, faults)
  std::int64_t seq = 0;
  std::int64_t rows = 0;
  double rel_rms = 0.0;
  double ratio_to_naive = 0.0;
  double lse_max_abs = 0.0;
  // Signed bias of O along the reference, <o - r, r> / <r, r>: negative when mass is lost from
  // the numerator only (fp8 P with an unquantized l), positive when l falls short (a stalled sum).
  double bias = 0.0;
  double gate_value = 0.0;    // the first bound's metric
  std::int64_t nan_count = 0;  // NaN + Inf in the candidate
  bool failed = false;         // a bound breached, or NaN/Inf in the output
  std::string decision;
  double seconds = 0.0;
};

// Runs measurements for the stages and records them as steps.
class bisect_context {
 public:
  bisect_context(provider_options base, std::vector<bound> bounds, attention_probe_options probe);

  // Measures case `c` on the provider `po` and appends a step. The decision is left to the
  // caller (set it through the returned reference, valid until the next evaluate).
  bisect_step& evaluate(const std::string& stage, const attention_case& c,
                        const provider_options& po, const std::string& change);
  bisect_step& evaluate(const std::string& stage, const attention_case& c, const std::string& change) {
    return evaluate(stage, c, m_base, change);
  }

  [[nodiscard]] const provider_options& base_provider() const { return m_base; }
  // Later stages run on `po` instead (bisect: after the fp8 points that explain the failure are
  // restored). Tiles and knobs are read from it from then on.
  void rebase(provider_options po) { m_base = std::move(po); }
  [[nodiscard]] const std::vector<bound>& bounds() const { return m_bounds; }
  // Later steps are judged against `b` (audit: relative to the baseline of a kernel that breaks
  // its bound everywhere).
  void rebound(std::vector<bound> b) { m_bounds = std::move(b); }
  [[nodiscard]] const std::vector<bisect_step>& trace() const { return m_trace; }
  [[nodiscard]] std::vector<bisect_step>& trace() { return m_trace; }
  // Tiles of the provider under test ({0,0}: opaque).
  [[nodiscard]] tile_shape tiles();
  [[nodiscard]] std::string provider_name();
  // The provider under test itself (for probes that drive it directly: tile inference).
  [[nodiscard]] attention_provider& provider() { return provider_for(m_base); }
  [[nodiscard]] nlohmann::json provider_metadata();
  // Whether the backend exposes its state dtypes and tiles (the emulator).
  [[nodiscard]] bool state_knobs() const { return m_base.backend == "emu"; }
  // Whether the case runs as split-KV decode (knob `decode`: T = 1..8 queries, masks none or
  // causal): family probes keep the case's T and skip masks decode does not take.
  [[nodiscard]] bool decode() const { return m_base.knobs.count("decode") > 0; }

  // `--mpi` (audit): measurements made elsewhere, answered without running the kernel. While
  // recording, every evaluate() keeps its outcome (the point, or the kernel's refusal or error),
  // keyed by the provider and the case; recorded() gives them as bytes (src/core/wire.hpp), and
  // add_recorded() makes another context answer those cases from them. A case not recorded runs.
  // The trace a context makes from recorded outcomes is the trace it would make measuring them.
  void record() { m_recording = true; }
  [[nodiscard]] std::string recorded() const;
  void add_recorded(const std::string& bytes, const std::string& place);

  std::function<void(const bisect_step&)> on_step;
  // Polled before each audit case: true once the command was interrupted (SIGINT/SIGTERM). The
  // cases left are then recorded as not run, so the partial report still says what was judged.
  std::function<bool()> stop;

 private:
  attention_provider& provider_for(const provider_options& po);

  provider_options m_base;
  std::vector<bound> m_bounds;
  attention_probe_options m_probe;
  std::map<std::string, std::unique_ptr<attention_provider>> m_providers;
  std::vector<bisect_step> m_trace;
  struct outcome {
    enum kind_t : std::uint8_t { m_point, m_unsupported, m_error };
    kind_t kind = m_point;
    attention_point point;
    std::string provider;      // the provider's name
    double seconds = 0.0;      // how long the measurement took where it was made
    std::int32_t code = 0;     // m_error: the exit code
    std::string place, text;   // m_unsupported: place and reason; m_error: the whole message
  };
  [[nodiscard]] outcome measure(const attention_case& c, const provider_options& po);
  bool m_recording = false;
  std::map<std::string, outcome> m_outcomes;  // recorded or added, by provider key and case id
};

// A provider_options copy with state `name` (or each of `names`) held in f64.
[[nodiscard]] provider_options with_states_f64(const provider_options& po,
                                               const std::vector<std::string>& names);

// "x300.0" style factor between two errors (for evidence lines).
[[nodiscard]] std::string factor_text(double num, double den);

// One step of the trace as JSON (`trace[]` of bisect and audit); `with_seconds` false drops
// its timing (for comparing two runs).
[[nodiscard]] nlohmann::json to_json(const bisect_step& s, bool with_seconds = true);

// The steps as a result-model table (bisect's and audit's trace).
[[nodiscard]] result::table trace_table(const std::vector<bisect_step>& steps, std::string title);

// The bound of bisect and audit when none is given (ratio_to_naive<=2), with its basis.
[[nodiscard]] bound default_bisect_bound();

}  // namespace numprobe::probes
