#pragma once
// Internal to the class probes of `numprobe audit` (audit_*_classes.cpp, audit_fp8_class.cpp):
// the runner every probe measures through, the lengths laid out for the kernel's tiles, and one
// function per bug class of NUMERICS.md. Each class function runs a probe designed for its class
// against a control that differs only in the mechanism under suspicion. Probes run on small
// heads (no class here depends on the head count, except GQA, which sets its own), at lengths
// laid out for the kernel's key tile, or for every common tile size when the tile is unknown.
#include <cstdint>
#include <string>
#include <vector>

#include "probes/classes/audit_classes.hpp"

namespace numprobe::probes::audit_kit {

// Tile sizes real kernels use (FlashAttention, FlashInfer, Triton tutorials, CUTLASS, CK).
inline constexpr std::int64_t k_common_tiles[] = {16, 32, 48, 64, 80, 96, 112, 128, 192, 256};
// Quiet lengths for an unknown tile: multiples of 768 = 2^8 * 3 are multiples of every common
// tile except 80 and 112.
inline constexpr std::int64_t k_unknown_quantum = 768;

struct measured {
  bool ran = false;
  bool error = false;    // no measurement: the backend failed, or refused the case
  bool refused = false;  // the kernel declared the case unsupported (error is set too)
  std::string message;
  std::string case_id;
  bisect_step step;
  [[nodiscard]] bool ok() const { return ran && !error; }  // a measurement exists
  [[nodiscard]] bool failed() const { return ran && !error && step.failed; }
  [[nodiscard]] bool passed() const { return ran && !error && !step.failed; }
  [[nodiscard]] bool nonfinite() const { return ran && !error && step.nan_count > 0; }
};

// The message of a case skipped because the audit was interrupted (bisect_context::stop).
inline constexpr const char* k_interrupted_case = "not run: the audit was interrupted (SIGINT/SIGTERM)";

class runner {
 public:
  // `po`: the provider the class probes run on (the kernel under test, with any fp8 points
  // restored: they are the fp8 class's to judge, and their rounding would blur the others).
  runner(bisect_context& ctx, std::vector<audit_error>& errors, std::vector<audit_error>& refusals,
         provider_options po)
      : m_ctx(ctx), m_errors(errors), m_refusals(refusals), m_po(std::move(po)) {}
  [[nodiscard]] const provider_options& default_po() const { return m_po; }

  // One case as a step of the trace, recorded in the class; a backend error is recorded in the
  // audit's errors, a refusal (unsupported_case) in its refusals, and the class goes on. A case
  // without a mask that the kernel refuses runs again causal (bottom-right): kernels that only
  // implement causal attention still get every class that causal rows can show.
  measured run(audit_class& k, const attention_case& c, const std::string& change,
               const provider_options* po = nullptr);
  [[nodiscard]] std::string describe(const measured& m) const;

  bisect_context& ctx() { return m_ctx; }

 private:
  measured run_once(audit_class& k, const attention_case& c, const std::string& change,
                    const provider_options& po);

  bisect_context& m_ctx;
  std::vector<audit_error>& m_errors;
  std::vector<audit_error>& m_refusals;
  provider_options m_po;
};

// A probe fails where its control passes (or fails 10x less).
[[nodiscard]] bool contrast(const measured& probe, const measured& control);

struct layout {
  std::int64_t tile_q = 0, tile_k = 0;  // 0: unknown
  bool quick = false;
  bool decode = false;
  std::int64_t seq_hi = 8192;
  std::int64_t decode_queries = 1;

  // The smallest quiet length >= n: a multiple of the key (and query) tile, so no tail tile is
  // partial, or of 768 for an unknown tile.
  [[nodiscard]] std::int64_t quiet(std::int64_t n) const;
  [[nodiscard]] std::int64_t tile_or(std::int64_t fallback) const { return tile_k > 0 ? tile_k : fallback; }
};

// The probe case: the reduced base at length `seq`, distribution `d`, mask `m`, nothing else.
[[nodiscard]] attention_case family(const attention_case& base, const layout& L, std::int64_t seq, input_dist d,
                                    mask_kind m = mask_kind::m_none);

// The class's verdict from its contrast (`fail`) and whether its evidence exists (`judged`: at
// least one discriminating probe and its control measured). Not judged: not-applicable when
// every case that did not run was refused by the kernel, else inconclusive; the evidence then
// names the cases that did not run and why.
void verdict(audit_class& k, bool fail, bool judged);

// Softmax state and merge (audit_state_classes.cpp).
[[nodiscard]] audit_class empty_split(runner& r, const attention_case& base, const layout& L);
[[nodiscard]] audit_class finite_sentinel(runner& r, const attention_case& base, const layout& L);
[[nodiscard]] audit_class rescale_frame(runner& r, const attention_case& base, const layout& L);
// Length-driven (audit_length_classes.cpp).
[[nodiscard]] audit_class accumulation(runner& r, const attention_case& base, const layout& L);
[[nodiscard]] audit_class index_threshold(runner& r, const attention_case& base, const layout& L);
[[nodiscard]] audit_class tail_tile(runner& r, const attention_case& base, const layout& L);
// Which keys and lanes a row reads (audit_geometry_classes.cpp).
[[nodiscard]] audit_class mask_geometry(runner& r, const attention_case& base, const layout& L);
[[nodiscard]] audit_class gqa_mapping(runner& r, const attention_case& base, const layout& L);
[[nodiscard]] audit_class wavefront(runner& r, const attention_case& base, const layout& L);
// fp8 quantization points (audit_fp8_class.cpp).
[[nodiscard]] audit_class fp8_scaling(runner& r, const attention_case& base, const layout& L);

}  // namespace numprobe::probes::audit_kit
