#pragma once
// Tile inference for opaque kernels (issue 14): exec, exec-worker and plugin kernels do not say
// their key tile, yet every tile-aware probe (drift's `--points tile`, bisect's boundary step)
// needs it. The tile is read off the error's structure:
//  - across rows: under a causal mask row t sees keys 0..t, so an event tied to key tiles (a new
//    tile begins, the partial last tile) changes the error of the rows t = k*B, or of the rows
//    from floor(S/B)*B on; one case gives S rows of evidence;
//  - across lengths: failures that follow S mod B (tail tiles) at lengths 2B, 5B/2, 3B of every
//    candidate B.
// Every candidate B in [8, 256] (multiples of 8) is scored against the observed events; B is
// reported only when it explains them clearly better than any other candidate, B/2 and 2B
// included. Weak evidence gives k = 0 ("unknown"): the inference never guesses. The query tile is
// not observable this way (rows are independent in a forward pass) and is reported as 0.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::probes {

// One candidate key tile scored against the observed events.
struct tile_candidate_score {
  std::int64_t k = 0;
  std::string model;       // "tail" | "periodic" | "passes at multiples" | "fails at multiples"
  // Agreement of predicted and observed events, 1 = all and only: F1 for the row profiles'
  // event rows, the Matthews correlation (clipped at 0) for the length sweep's failing lengths.
  double score = 0.0;
  std::string metric = "F1";
  std::int64_t predicted = 0, observed = 0, matched = 0;
};

struct tile_inference {
  bool ran = false;
  std::int64_t q = 0;  // 0: not observable
  std::int64_t k = 0;  // 0: unknown
  std::string confidence = "not run";  // high | medium | unknown | not run
  std::string signal = "none";         // which measurement decided (or "none")
  std::string evidence;                // one line: what was seen, best vs second best
  tile_candidate_score best, second;   // second: the best candidate with another k
  std::vector<std::int64_t> profile_lengths;  // causal row profiles run (S)
  std::vector<std::int64_t> event_rows;       // rows where a profile's error stepped
  std::vector<std::int64_t> sweep_lengths;    // length sweep run (S), if any
  std::vector<std::int64_t> failing_lengths;  // of those, the ones in the high-error cluster
  std::vector<std::string> cases;             // every case id run
  std::vector<std::string> errors;            // backend errors of skipped probes
  double seconds = 0.0;

  [[nodiscard]] bool known() const { return k > 0; }
};

struct tile_inference_options {
  bool row_profiles = true;  // causal row profiles (needs a kernel that takes mask=causal)
  bool length_sweep = true;  // the pass/fail sweep over S mod B (only when profiles are unclear)
};

// Runs the cheap cases (small heads, lengths below 800) on `provider`; `base` gives the dtype,
// head dim and seed. Backend errors of single probes are recorded and the others go on.
[[nodiscard]] tile_inference infer_tile(attention_provider& provider, const attention_case& base,
                                        const tile_inference_options& o = {});

// The candidate tiles the inference scores: multiples of 8 in [8, 256].
[[nodiscard]] std::vector<std::int64_t> tile_candidates();

// Lengths k*B-1, k*B, k*B+1 for the common tile sizes 16, 32, 48, 64, 80, 96, 112, 128, 192
// and 256, at several k within [lo, hi], deduplicated, at most `cap` of them: the lengths that
// cross every usual tile boundary when the kernel's tile is unknown.
[[nodiscard]] std::vector<std::int64_t> common_tile_lengths(std::int64_t lo, std::int64_t hi,
                                                            std::size_t cap = 96);

// `{q, k, confidence, evidence, signal, best, second, ...}` for drift, bisect and audit JSON.
[[nodiscard]] nlohmann::json to_json(const tile_inference& t);
// "96x? (inferred, high: ...)" or "unknown (...)": one line for terminals.
[[nodiscard]] std::string tile_text(const tile_inference& t);

}  // namespace numprobe::probes
