#pragma once
// Sizes are checked against memory before anything is allocated: a case that cannot fit is an
// input error (exit 2) naming the flag or key that made it large, not a process that grows
// until the OOM killer ends it with no message.
//
// The budget is, in order: set_memory_budget() (the CLI's --max-memory GIB), the environment
// variable NUMPROBE_MAX_MEMORY (bytes, or with a K, M, G or T suffix: powers of 1024), or 80% of
// the memory the kernel reports available (MemAvailable), which leaves room for the OS and
// the estimate's slack. 0 means unknown, and then nothing is refused.
#include <cstdint>
#include <string>

#include "numprobe/core/attention_case.hpp"

namespace numprobe {

// The fraction of MemAvailable a single case may plan to use.
inline constexpr double k_memory_fraction = 0.8;

[[nodiscard]] double available_memory_bytes();  // MemAvailable; 0 when unknown
[[nodiscard]] double memory_budget_bytes();
// Where the budget comes from, for messages: "--max-memory", "NUMPROBE_MAX_MEMORY" or
// "80% of available memory".
[[nodiscard]] std::string memory_budget_source();
void set_memory_budget(double bytes);  // <= 0 clears the override

// Parses "12", "12G", "512M" (powers of 1024; plain numbers are bytes). Throws an input
// error naming `place` on anything else.
[[nodiscard]] double parse_memory_size(const std::string& text, const std::string& place);

// Throws an input error at `place` when `bytes` exceeds the budget; `what` says what needs it.
void check_memory(const std::string& place, const std::string& what, double bytes);

// Peak host bytes of one attention case on the probe path (attention_probe.cpp): rounded and
// exact K and V in double, the evaluated rows' Q (rounded and exact) and four outputs
// (candidate, reference, end-to-end reference, naive baseline), and one float copy of K and V
// for a provider's conversion. An estimate within a small factor, which is all a refusal
// before allocation needs.
[[nodiscard]] double attention_case_bytes(const attention_case& c, std::int64_t rows_evaluated,
                                          bool end_to_end);

// make sure an attention case fits, blaming `place` (the flag or key that sets its size).
void check_attention_memory(const attention_case& c, std::int64_t rows_evaluated,
                            bool end_to_end, const std::string& place);

}  // namespace numprobe
