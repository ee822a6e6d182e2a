#pragma once
// `numprobe invariance` (issue 30): does the same request get the same bits? Five checks, each
// a set of comparisons of two sides that should agree bit for bit:
// - repeat: the same call N times on one kernel instance;
// - batch: a sequence alone against the same sequence inside batches of other sequences
//   (distinct seeds), in order and permuted;
// - decode: the last row of a prefill of S keys against a T = 1 call over the same keys, at
//   lengths crossing the key tile;
// - chunk: the last C rows of a prefill against a T = C call over the same keys;
// - splits: split-KV decode at each split count and split size, alone against in a batch.
// A check is invariant when every comparison is identical; else each differing side is judged
// against the accuracy bound: within-bound when all hold, breaks when one does not.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "probes/invariance/bit_comparison.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::probes {

enum class invariance_verdict : std::uint8_t { m_invariant, m_within_bound, m_breaks, m_not_applicable };
[[nodiscard]] std::string to_string(invariance_verdict v);

// The check names, in run order.
[[nodiscard]] const std::vector<std::string>& invariance_check_names();

struct invariance_options {
  attention_case base;      // the sequence (batch 1): its T, S, heads, dtype, mask, seed
  provider_options provider;
  std::vector<std::string> checks;  // empty: every check
  std::int64_t repeats = 3;
  std::vector<std::int64_t> batch_sizes{1, 2, 3, 8, 33, 64};
  std::vector<std::int64_t> chunks;        // empty: 16 and the query tile + 1 (or 65 if opaque)
  std::vector<std::int64_t> decode_lengths;  // empty: Bk, Bk+1, 2Bk, 2Bk+1 (96, 97, 128, 129 if opaque)
  std::vector<bound> bounds;  // empty: the default accuracy bound of the backend
  // batch and splits also run ragged batches (members of other lengths, seq_lens) where the
  // backend takes them (emu, ref, cuda/hip --decode; exec and Python with provider.ragged).
  bool ragged_batches = true;
};

// One comparison of a check: two sides and what differed.
struct invariance_comparison {
  std::string label;           // "B=8 member 0", "S=97", "C=16", "splits=2 B=8"
  std::string case_a, case_b;  // what each side ran
  bit_comparison bits;
};

struct invariance_check {
  std::string name;
  invariance_verdict verdict = invariance_verdict::m_invariant;
  bit_comparison bits;  // over every comparison
  std::vector<invariance_comparison> comparisons;
  std::vector<std::string> cases;  // both sides of the first differing comparison (else the first)
  std::string reason;              // not-applicable: why; breaks: the side over the bound
  std::vector<std::string> out_of_bound;  // sides (case ids) that exceed the bound
  // batch and splits: "run" when ragged batches ran, else why not ("" for the other checks).
  std::string ragged = "off";
};

struct invariance_result {
  invariance_options options;
  std::string backend;
  std::vector<invariance_check> checks;
  double seconds = 0.0;
};

// Throws an input error for unknown check names (place `--checks`).
[[nodiscard]] invariance_result run_invariance(const invariance_options& o);

// 1 when a check breaks, or when a check named in `require` is not invariant; else 0.
[[nodiscard]] int invariance_exit_code(const invariance_result& r, const std::vector<std::string>& require);

[[nodiscard]] nlohmann::json to_json(const invariance_result& r);
// The result model: a metric per check (differing elements, max ulp), the table of checks, a
// histogram per check with differences, to_json(r) as details.
void fill_result(const invariance_result& r, const std::vector<std::string>& require, result::check_result& out);

}  // namespace numprobe::probes
