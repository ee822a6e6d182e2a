#pragma once
// `numprobe scan RELEASE [--against ORIGINAL]` (issue 18 item 2): a released quantized checkpoint
// (numprobe/io/release.hpp) read to exact values, tensor by tensor in row slabs.
// - Alone: the release's own statistics per tensor: the code histogram, the range of its block
//   scales, e4m3 block scales that are subnormal, saturated blocks (the stored scale at the scale
//   format's largest value), blocks whose scale is 0.
// - With ORIGINAL (a bf16/f16/f32 checkpoint with the same base names): the release's error
//   against it, as the scan measures a candidate format: SQNR, relative RMS, flushed elements
//   (finite non-zero originals that decode to 0), clipped elements (|original| beyond the
//   block's largest code value), outlier blocks (numprobe/formats/outlier_flushes.hpp). And
//   whether the release's codes and scales are numprobe's quantization of the original under
//   some combination of conventions (quant --identify's comparison, probes/identify/identify.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "numprobe/io/release.hpp"
#include "probes/identify/identify.hpp"

namespace numprobe::probes {

struct release_scan_options {
  std::string release;
  std::string against;                       // "" = the release's own statistics only
  std::optional<io::release_layout> layout;  // --layout
  std::string filter;                        // ECMAScript regex on base names ("" = all)
  // Identification quantizes the whole original tensor under every convention variant; larger
  // tensors are measured but not identified (the report says so).
  std::int64_t identify_max_elements = std::int64_t{1} << 26;
  std::vector<bound> bounds;  // on the worst tensor: sqnr_db, rel_rms, flushed_frac, ...
  // NaN or Inf among the decoded weights (a NaN scale, a NaN code) is a finding (exit 1, the
  // gate nonfinite<=0) unless allowed (`--allow-nonfinite`).
  bool allow_nonfinite = false;
};

struct release_stats {
  std::vector<std::int64_t> code_histogram;  // by code (0 .. 2^bits - 1)
  std::int64_t elements = 0, blocks = 0;
  double scale_min = 0.0, scale_max = 0.0;   // over non-zero stored scales
  std::int64_t zero_scale_blocks = 0;        // stored scale 0: the block decodes to 0
  std::int64_t subnormal_scale_blocks = 0;   // e4m3 block scales below 2^-6
  std::int64_t saturated_blocks = 0;         // stored scale at the scale format's largest value
  std::int64_t nonfinite = 0;                // decoded values that are NaN or inf
  double abs_max = 0.0, sum_squares = 0.0;   // over the finite decoded values
};

struct release_against {
  double sqnr_db = 0.0, rel_rms = 0.0, max_abs = 0.0;
  std::int64_t flushed = 0, clipped = 0, outlier_blocks = 0, outlier_flushed = 0;
  double flushed_frac = 0.0, outlier_flushed_frac = 0.0;
  // NVFP4: the release's s_t against numprobe's amax / (6 * 448) of the original.
  bool has_tensor_scale = false, tensor_scale_match = false;
  double release_tensor_scale = 0.0, numprobe_tensor_scale = 0.0;
  std::optional<identify_result> identify;
  std::string identify_skipped;  // why not identified ("" when identified)
};

struct release_tensor_report {
  io::release_tensor tensor;
  release_stats stats;
  std::optional<release_against> against;
};

struct release_scan_report {
  release_scan_options options;
  std::string layout, detected_by;
  std::vector<release_tensor_report> tensors;
  std::size_t passthrough = 0;
  std::vector<std::string> missing_in_original;  // base names ORIGINAL lacks
  std::vector<std::pair<std::string, double>> breaches;  // bound text, measured
  std::int64_t nonfinite = 0;                             // decoded NaN/Inf, all tensors
  std::vector<std::string> nonfinite_tensors;             // the tensors that hold them
  double seconds = 0.0;
};

// Whether PATH (a .safetensors file, an index .json or a folder) is a released quantized
// checkpoint rather than one to quantize: a config.json beside it with a quantization_config, or
// tensor names that only quantized layouts use (weight_scale, weight_packed, qweight, *_blocks
// with *_scales, ...). `scan` reads a release with run_release_scan.
[[nodiscard]] bool looks_like_release(const std::string& path);

// The original of release tensor `t` (scan --against, convert --against) must be that weight:
// the same shape, exactly (a transposed or flattened original holds the same count of other
// numbers), in a floating type (f32, f16, bf16, f64; integer or fp8 tensors are not an original
// to measure a release against). Throws (exit 2) naming the original tensor and both shapes and
// dtypes.
void check_original(const io::tensor_view& original, const io::release_tensor& t);

// Rows [r0, r1) of release tensor t's original (a view of original_name_of(t)), in t's stored row
// order: GGUF Q/K rows (t.rope_heads) are read through io::original_row.
void read_original_rows(const io::tensor_view& original, const io::release_tensor& t, std::int64_t r0,
                        std::int64_t r1, std::vector<double>& out);

// Throws numprobe::error (exit 2) naming the file or tensor: no release layout, a malformed
// layout, an original tensor of another shape or dtype (check_original), NaN/Inf in the original.
[[nodiscard]] release_scan_report run_release_scan(const release_scan_options& o);

// The report's metric by name for bounds (the worst over tensors: the lowest sqnr_db, the
// highest of the others); throws (exit 2) on an unknown name or one that needs --against.
[[nodiscard]] double release_metric(const release_scan_report& r, const std::string& name);

[[nodiscard]] nlohmann::json to_json(const release_scan_report& r);
void fill_result(const release_scan_report& r, result::check_result& out);

// The gate nonfinite<=0 over a release's decoded values (scan RELEASE, convert): held when there
// are none or they are allowed (--allow-nonfinite: reported, not gated), with a NON-FINITE line
// naming the first tensor that holds them (`note` appended to it). A failed gate fails `out`.
void add_nonfinite_gate(std::int64_t nonfinite, const std::vector<std::string>& tensors, bool allowed,
                        const std::string& note, result::check_result& out);

}  // namespace numprobe::probes
