#pragma once
// Precision bisection and disable-the-mechanism checks (issue 5), for backends that expose
// their state dtypes and tiles (the emulator). Each state (q,k,v,s,p,m,l,o) is upgraded to f64
// alone and in delta-debugging sets; the minimal set whose upgrade brings the error under the
// bound is the culprit (NUMERICS.md: a running quantity held in the wrong dtype).
#include <cstdint>
#include <string>
#include <vector>

#include "probes/classes/bisect_families.hpp"

namespace numprobe::probes {

struct precision_result {
  bool ran = false;
  std::string reason;                // why it did not run, or where it ran
  std::string family_case;           // the case it bisected
  bool all_f64_fixes = false;        // upgrading every state removes the failure
  std::vector<std::string> culprit;  // minimal set (empty: no state explains the failure)
  std::vector<std::string> single_fixes;  // states whose upgrade alone fixes it
  // Error vs length before and after upgrading the culprit.
  std::vector<std::int64_t> curve_lengths;
  std::vector<double> curve_before, curve_after;
};

struct mechanism_check {
  std::string name;       // "one key tile", ...
  bool ran = false;
  bool removes = false;   // the failing case passes with the mechanism disabled
  double before = 0.0, after = 0.0;
  std::string note;
};

struct precision_candidate {
  attention_case c;
  probe_outcome baseline;  // its measurement as the kernel holds its state (must fail)
};

// `candidates`: failing cases to bisect, best first (the case under test, then families where
// other mechanisms are quiet); the first whose all-f64 upgrade passes is bisected. An upgrade
// "passes" when the bound holds and the error at least halves, so an unrelated state cannot
// tip a borderline case under the bound.
[[nodiscard]] precision_result bisect_precision(bisect_context& ctx,
                                                const std::vector<precision_candidate>& candidates);

// One key tile (tile_k >= S): no rescale and no tail tile. `c` must fail with the base provider.
// The rescale forced on every key tile (emu knob force-rescale): removes errors that ride on a
// conditional or lagged rescale path.
[[nodiscard]] mechanism_check check_forced_rescale(bisect_context& ctx, const attention_case& c,
                                                   double before);
[[nodiscard]] mechanism_check check_one_key_tile(bisect_context& ctx, const attention_case& c,
                                                 double before);

}  // namespace numprobe::probes
