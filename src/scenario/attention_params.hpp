#pragma once
// Parameters shared by the attention-case runners (attention, drift): the same names as the
// CLI flags of `numprobe attention` / `numprobe drift`, with '_' for '-'.
#include <memory>
#include <optional>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/row_sampling.hpp"
#include "src/providers/provider.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {

[[nodiscard]] std::vector<param_spec> attention_case_params();

// The case with S = seq (or the case = "ID" parameter). Throws input errors naming the key.
[[nodiscard]] attention_case make_attention_case(const check_spec& c, std::int64_t seq);
// The provider for the check: --backend overrides; "best" tries cuda, then hip, then emu.
// check_provider_options: the same choice as options (for probes that build their own
// providers, one per side: invariance).
[[nodiscard]] provider_options check_provider_options(const check_spec& c, const run_context& ctx);
[[nodiscard]] std::unique_ptr<attention_provider> make_check_provider(const check_spec& c,
                                                                      const run_context& ctx);
// rows = all | N | auto (auto = `auto_rows`, 0 meaning all).
[[nodiscard]] row_sampling make_check_sampling(const check_spec& c, std::int64_t auto_rows);
[[nodiscard]] std::int64_t positive(const std::string& text, const std::string& place);

}  // namespace numprobe::scenario
