#pragma once
// Long-row softmax: the case (rows of vocabulary logits, masks, temperature, softcap), its seeded
// logits, and the high-precision reference for softmax, log-softmax, LSE and cross-entropy
// (issue 9, `numprobe softmax`).
//
// Semantics shared by every implementation:
//  - z = cap * tanh(x / cap) when softcap > 0, then z / temperature (the sampler's order:
//    the model's final softcap, then the sampling temperature).
//  - Masked entries are -inf logits: p = 0, log p = -inf.
//  - A fully masked row has LSE = -inf, p = 0 everywhere, log p = -inf everywhere and no
//    target (cross-entropy 0, as an ignored index); never NaN.
//  - The target of a row is a seeded unmasked index; cross-entropy = LSE - z[target].
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/formats/format.hpp"

namespace numprobe {

enum class softmax_mask : std::uint8_t {
  m_none,
  m_padding,  // the last `masked` entries (vocabulary padded to a multiple, never sampled)
  m_banned,   // a seeded 1/64 of the entries (banned tokens, grammar masks)
  m_prefix,   // the first `masked` entries ("first-chunk": a fully masked leading chunk)
  m_all,      // every entry: LSE = -inf
};

[[nodiscard]] std::string_view to_string(softmax_mask m);
// none|padding|banned|first-chunk|all
[[nodiscard]] softmax_mask parse_softmax_mask(std::string_view text, const std::string& place = "--mask");

struct softmax_case {
  std::int64_t vocab = 128256;  // entries per row
  std::int64_t rows = 4;
  formats::format_id dtype = formats::format_id::m_bf16;  // logits as the kernel reads them
  softmax_mask mask = softmax_mask::m_none;
  std::int64_t masked = 0;      // padding / first-chunk: how many entries (0: 1 + vocab / 16)
  double temperature = 1.0;
  double softcap = 0.0;         // 0 = off
  input_dist dist = input_dist::m_normal;
  double logit_shift = -2.0e4;  // for dist=shifted
  std::uint64_t seed = 7;

  // Entries masked by padding/first-chunk (resolved default).
  [[nodiscard]] std::int64_t masked_count() const;
  void validate() const;  // throws an input error naming the flag
  // softmax(V=..,R=..,in=bf16,mask=..,seed=..) plus non-default fields.
  [[nodiscard]] std::string id() const;
};

[[nodiscard]] softmax_case parse_softmax_case(std::string_view id);

// The exact (unrounded) logit of entry i of row r; a pure function of (case, r, i).
[[nodiscard]] double softmax_logit(const softmax_case& c, std::int64_t row, std::int64_t i);
// Whether entry i of row r is masked (the case's definition).
[[nodiscard]] bool softmax_masked(const softmax_case& c, std::int64_t row, std::int64_t i);
// Target index of row r: a seeded unmasked entry, -1 for a fully masked row.
[[nodiscard]] std::int64_t softmax_target(const softmax_case& c, std::int64_t row);

// Logits of the given rows, [rows.size(), V]; masked entries are -inf. `rounded`: rounded to
// the case dtype (what a kernel reads); else the exact values (for end-to-end error).
[[nodiscard]] std::vector<double> softmax_logits(const softmax_case& c,
                                                 std::span<const std::int64_t> rows, bool rounded);

// What every softmax implementation returns, for the requested rows.
struct softmax_output {
  std::vector<std::int64_t> rows;
  std::int64_t vocab = 0;
  std::vector<double> p;      // [rows, V] probabilities
  std::vector<double> logp;   // [rows, V] log-probabilities (-inf where masked)
  std::vector<double> lse;    // [rows]; natural log of sum exp(z); -inf for a fully masked row
  std::vector<double> ce;     // [rows] cross-entropy against softmax_target (0 without target)
};

// Output of the right size with every element NaN (never-written elements cannot pass).
[[nodiscard]] softmax_output make_poisoned_softmax(std::vector<std::int64_t> rows, std::int64_t vocab);

}  // namespace numprobe

namespace numprobe::reference {

// Templated reference in arithmetic type Real (double, or cpp_bin_float_50 in tests), defined in
// reference/softmax_impl.hpp. `logits` is [rows.size(), V] as from softmax_logits (masked = -inf).
template <class Real>
[[nodiscard]] softmax_output softmax_generic(const softmax_case& c, std::span<const double> logits,
                                             std::span<const std::int64_t> rows);

// The production double reference (compensated sums): relative error <= 1e-12 (tested).
[[nodiscard]] softmax_output softmax(const softmax_case& c, std::span<const double> logits,
                                     std::span<const std::int64_t> rows);

// The same-precision naive baseline, as a framework computes it: logits in the case dtype
// upcast to fp32, max, a pairwise fp32 sum of expf(z - max), p = expf(z - max) / sum, all in
// fp32 (outputs in fp32, as torch.softmax(x.float())).
[[nodiscard]] softmax_output softmax_naive(const softmax_case& c, std::span<const double> logits,
                                           std::span<const std::int64_t> rows);

}  // namespace numprobe::reference
