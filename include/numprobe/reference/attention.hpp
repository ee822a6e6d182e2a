#pragma once
// High-precision attention reference (DESIGN.md, "The reference").
//
// Semantics shared by every entry point:
//  - q_rows is [rows.size(), Hq, D] for the given flat rows (b*T + t); k, v are [B*S, Hkv, D].
//  - logits = scale * q.k, then softcap (cap * tanh(x / cap)) when c.softcap > 0, then mask.
//  - The mask is built here from the case definition, independently of any kernel code.
//  - GQA: query head h reads KV head h / (Hq / Hkv).
//  - A fully masked row gives O = 0 and LSE = -inf, never NaN.
#include <cstdint>
#include <span>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/attention_output.hpp"

namespace numprobe::reference {

// The reference's own mask: keys visible to query row t (bottom-right alignment for causal
// and window; explicit ranges as given).
[[nodiscard]] key_range visible_keys(const attention_case& c, std::int64_t t);
// The same for query t of batch member `member`: in a ragged batch (c.seq_lens), the member's
// own keys [0, seq_lens[member]) with its queries aligned to their end.
[[nodiscard]] key_range visible_keys(const attention_case& c, std::int64_t member, std::int64_t t);

// Templated reference in arithmetic type Real (double, or boost cpp_bin_float_50 in tests).
// Defined in reference/attention_impl.hpp; explicitly instantiated for double.
template <class Real>
[[nodiscard]] attention_output attention_generic(const attention_case& c,
                                                 std::span<const double> q_rows,
                                                 std::span<const std::int64_t> rows,
                                                 std::span<const double> k,
                                                 std::span<const double> v);

// The production double reference: same semantics, blocked with Eigen GEMMs and vectorised
// exp, error-compensated row sums. Relative error <= 1e-12 (proved against multiprecision).
[[nodiscard]] attention_output attention(const attention_case& c, std::span<const double> q_rows,
                                         std::span<const std::int64_t> rows,
                                         std::span<const double> k, std::span<const double> v);

// The same-precision naive baseline, as a framework computes it in the input dtype without
// tiling: S = QK^T with fp32 accumulation rounded to the dtype; softmax in fp32 rounded to the
// dtype; O = P.V with fp32 accumulation rounded to the dtype. Inputs must already be in dtype.
[[nodiscard]] attention_output attention_naive(const attention_case& c,
                                               std::span<const double> q_rows,
                                               std::span<const std::int64_t> rows,
                                               std::span<const double> k,
                                               std::span<const double> v);

}  // namespace numprobe::reference
