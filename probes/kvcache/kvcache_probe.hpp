#pragma once
// The FP8 KV-cache study (issue 9, `numprobe kvcache`): for an fp8 KV cache (e4m3fn, e4m3fnuz,
// e5m2) and each scale layout (tensor, head, channel, token), as a function of the scale (the
// amax-based scale times a multiplier) and of the context length, the error of K, V and of the
// attention output, split into clipping (elements beyond the format's range, saturated) and
// rounding (the rest). Static scales (tensor, head, channel) are calibrated on a prefix of the
// context, as serving stacks calibrate them; token scales are computed per token as it is
// written. Rare outlier tokens that only appear past a position model what long contexts bring
// (NUMERICS.md, "FP8 KV-cache scales"): a short calibration never sees them.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "numprobe/formats/format.hpp"
#include "src/kernels/emu/flash_attention.hpp"

namespace numprobe::probes {

struct kvcache_options {
  // dist, heads, kv_heads, head_dim, dtype, seed, scale; `queries` query vectors per head
  // attend to every cached key (mask none). batch and seq are set by the probe.
  attention_case base;
  std::vector<std::int64_t> seqs{1024, 4096, 16384, 65536, 131072};
  std::vector<formats::format_id> formats{formats::format_id::m_e4m3fn, formats::format_id::m_e4m3fnuz,
                                          formats::format_id::m_e5m2};
  std::vector<emu::kv_scale_layout> layouts{emu::kv_scale_layout::m_tensor, emu::kv_scale_layout::m_head,
                                            emu::kv_scale_layout::m_channel, emu::kv_scale_layout::m_token};
  std::vector<double> multipliers{0.0625, 0.25, 1.0, 4.0, 16.0};
  std::int64_t calib = 4096;          // static scales from the first `calib` tokens (0: the whole context)
  double outlier_rate = 1e-4;         // per token, at positions >= outlier_after
  std::int64_t outlier_after = 16384;
  double outlier_scale = 64.0;        // an outlier token's K and V rows are multiplied by this
  // Output rel_rms bound. Default: per configuration, 2x its rounding-only output error at the
  // shortest length (a same-precision baseline ratio).
  std::optional<double> bound;
};

// Error of one tensor (K or V) over the context [0, seq): relative RMS contributions, where
// rel_rms^2 = clip_rel_rms^2 + round_rel_rms^2 exactly (an element is either clipped or rounded).
struct kv_tensor_error {
  std::int64_t elements = 0;
  std::int64_t clipped = 0;
  double clip_rel_rms = 0.0;
  double round_rel_rms = 0.0;
  double rel_rms = 0.0;
};

struct kvcache_point {
  formats::format_id format{};
  emu::kv_scale_layout layout{};
  double multiplier = 1.0;
  std::int64_t seq = 0;
  std::int64_t outlier_tokens = 0;  // outlier tokens within [0, seq)
  kv_tensor_error k, v;
  // Attention output (rel RMS against the exact K/V) with only clipping applied (clamped, not
  // rounded), with only rounding (rounded with an unbounded exponent range), and with both.
  double out_clip_rel_rms = 0.0;
  double out_round_rel_rms = 0.0;
  double out_rel_rms = 0.0;
  double bound = 0.0;
  bool fails = false;
  std::string dominant;  // "clipping" | "rounding": the larger output contribution
};

struct kvcache_summary {
  std::int64_t failures = 0, clip_driven = 0, round_driven = 0;
  std::string driver;  // clipping | rounding | mixed | none
  // Per format at the multiplier nearest 1: layouts passing at every length while another fails.
  struct format_fix {
    formats::format_id format{};
    std::vector<std::string> failing;  // "tensor (from S=65536)"
    std::vector<std::string> fixing;
  };
  std::vector<format_fix> fixes;
  std::string text;
};

struct kvcache_result {
  kvcache_options options;
  std::int64_t context = 0;          // the longest length
  std::int64_t calib_tokens = 0;
  std::vector<std::int64_t> outlier_positions;
  std::vector<kvcache_point> points;  // format-major, then layout, multiplier, length
  kvcache_summary summary;
  double seconds = 0.0;
};

[[nodiscard]] kvcache_result run_kvcache(const kvcache_options& o);
[[nodiscard]] nlohmann::json to_json(const kvcache_result& r);

// Round y to format f's grid (RNE, its subnormals) with no upper limit: the rounding error of a
// value without the clipping (equal to round_to for |y| <= max_finite).
[[nodiscard]] double round_unbounded(formats::format_id f, double y);
// The outlier tokens of a context of `seq` tokens (positions, ascending).
[[nodiscard]] std::vector<std::int64_t> kv_outlier_positions(const kvcache_options& o, std::int64_t seq);

// Gateable study metrics: failures, clip_driven, round_driven (configurations), and
// worst.out_rel_rms; nullopt for another name.
[[nodiscard]] std::optional<double> kvcache_metric(const kvcache_result& r, const std::string& name);
[[nodiscard]] const std::vector<std::string>& kvcache_metric_names();
// The result model: the study metrics, the --bound gate (failures <= 0) and one gate per bound,
// the output-error curve per configuration, the configurations table, the full-precision data
// table; to_json(r) as details.
// all_multipliers: the view's table lists every multiplier at every length (`kvcache --all`).
void fill_result(const kvcache_result& r, const std::vector<bound>& bounds, result::check_result& out,
                 bool all_multipliers = false);

// Sets the swept lists from comma lists ("1024,4096", "e4m3fn,e5m2", "tensor,token",
// "2^-4,1,4"); `place(key)` names the flag or scenario key in errors (exit 2).
void set_kvcache_lists(kvcache_options& o, const std::string& seqs, const std::string& formats,
                       const std::string& layouts, const std::string& multipliers,
                       const std::function<std::string(const std::string& key)>& place);

}  // namespace numprobe::probes
