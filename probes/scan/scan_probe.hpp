#pragma once
// The scan probe: quantize every tensor of a checkpoint with one or more block-scaling schemes
// and rank the tensors by what they lose. A checkpoint (.safetensors or an index .json) is
// streamed through io::checkpoint::for_each; each tensor is cut into row bands (whole scaling
// blocks), decoded to double and quantized band by band, so memory is bounded by one band,
// not by the largest tensor. Per-tensor scales (NVFP4's s_t, the `tensor` scheme) come from a
// first amax pass and are imposed on every band (see scan_probe.cpp, "sentinel row").
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/io/dtype.hpp"

namespace numprobe::probes {

// What ranks the tensors (--rank-by, scenario key rank_by), worst first, by the primary scheme:
//   sqnr     lowest SQNR first: energy-weighted, so a tensor whose energy sits in a few outliers
//            that the format keeps ranks as good even when their blocks flush the rest;
//   flushed  flushed_frac, elements coded to 0 / elements;
//   outlier  outlier_flushed_frac, outlier flushes (numprobe/formats/outlier_flushes.hpp) /
//            elements: the flushes an outlier's block scale caused;
//   bulk     bulk_rel_rms, the relative RMS error over the elements below the magnitude
//            percentile (scan_bulk.cpp): what the bulk of the weights loses, which outliers'
//            energy cannot hide (the default);
//   output   output_rel_rms, the expected relative error of the layer output y = W x,
//            E|dW x|^2 / E|W x|^2. With --act-stats (each input channel's E[x_j^2], the
//            statistic AWQ uses) that is sum_ij dW_ij^2 E[x_j^2] / sum_ij W_ij^2 E[x_j^2], summed in
//            the pass that sums the other errors (scan_fused.cpp); tensors without statistics
//            rank after those with. Without them the activations are taken as isotropic
//            (independent, zero mean, equal variance): the expectation is sum dW^2 / sum W^2, so
//            it equals rel_rms and ranks as sqnr does (docs/scan.md), and the report says so.
enum class scan_rank { m_sqnr, m_flushed, m_outlier, m_bulk, m_output };
// "sqnr", ...; throws numprobe::error (exit 2) naming `where` (the flag or scenario key).
[[nodiscard]] scan_rank parse_scan_rank(const std::string& s, const std::string& where);
[[nodiscard]] const char* name(scan_rank k);
// The bulk: elements whose |x| is below the nearest-rank 90th percentile of the tensor's |x|
// (bfloat16-truncated, over about 2^18 sampled elements, the whole tensor under 2^19, with the
// error summed over the same sample; scan_bulk.cpp, docs/scan.md). p90, not p99: an outlier channel is often more than 1%
// of a tensor (4 of 256 input channels are 1.6%), and outliers inside the bulk would dominate
// its energy as they dominate the tensor's.
inline constexpr std::int64_t k_bulk_percentile_tenths = 9;

struct scan_options {
  std::string checkpoint;
  scan_rank rank_by = scan_rank::m_bulk;
  std::vector<std::string> schemes = {"nvfp4"};  // the first is primary (ranking)
  std::string filter;                            // ECMAScript regex on names ("" = all)
  bool all = false;                              // include non-matrix tensors (norms, biases)
  std::size_t top = 20;                          // tensors the report's ranked table shows
  // --act-stats: a .safetensors file of each input channel's mean square activation E[x_j^2],
  // per weight W [.., in] a tensor of `in` values named W's name, or W's name with its trailing
  // ".weight" replaced by ".input_sq_mean" (the first that exists); "" = none (docs/scan.md).
  std::string act_stats;
  // Applied to each scheme's defaults before it is scanned (the quantization conventions:
  // `scan --preset/--scale-division/...`, docs/quant-conventions.md); empty: the definitions.
  std::function<void(formats::scheme_config&)> adjust_scheme;
  std::int64_t band_elements = std::int64_t{1} << 20;
  // A reader thread keeps the next tensors' bytes coming into the page cache, at most this many
  // bytes ahead of the tensor being scanned (src/io/prefetch.hpp), so disk reads overlap the
  // quantization; 0 turns it off. Never changes a result, only the speed.
  std::uint64_t prefetch_window = std::uint64_t{512} << 20;
  // A tensor larger than this hands each band's pages of the memory map back to the kernel as
  // soon as the band is done (madvise DONTNEED: the page cache keeps them, only this process's
  // mapping drops them), so resident memory stays near this size plus the bands in flight
  // instead of growing to the largest tensor (an embedding or lm_head of a few GiB). Smaller
  // tensors are released whole when done. Never changes a result.
  std::uint64_t release_above = std::uint64_t{256} << 20;
  // Called after each tensor with (tensors done, tensors selected, name).
  std::function<void(std::size_t, std::size_t, const std::string&)> progress;
  // `scan --shard i/N`: scan only the tensors scan_shard_of gives shard i of N (count 1: all).
  // Everything else of the report (the selection, skipped, act-stats coverage) is the whole
  // checkpoint's, so `numprobe merge` of the N shards is the unsharded report (merge_scan_shards).
  int shard_index = 0, shard_count = 1;
};

// The worst block of a tensor under one scheme, element by element (first 32 elements,
// always including the one that set the scale).
struct scan_worked_block {
  formats::block_stats stats;  // row0/argmax are tensor coordinates (row-major flat index)
  std::vector<std::int64_t> flat;
  std::vector<double> input, dequant;
  bool outlier = false;  // an outlier block (its scale was set by one element and it flushed)
};

struct scan_scheme_result {
  std::string scheme;
  std::string conventions;  // formats::conventions_text of the config scanned
  std::int64_t elements = 0, blocks = 0;
  double sum_sq = 0.0, sum_sq_err = 0.0;  // over finite inputs
  double sqnr_db = 0.0, rel_rms = 0.0, max_abs = 0.0;
  std::int64_t flushed = 0, clipped = 0, scale_underflow_blocks = 0;
  std::int64_t outlier_blocks = 0, outlier_flushed = 0;
  std::int64_t nonfinite_inputs = 0, nonfinite_outputs = 0;
  // Flush-aware columns (issue 17): flushed / elements, outlier_flushed / elements, and the
  // relative RMS error over the bulk (|x| below the tensor's bulk bound, scan_tensor::bulk_below,
  // in the sampled strips).
  double flushed_frac = 0.0, outlier_flushed_frac = 0.0;
  double bulk_sum_sq = 0.0, bulk_sum_sq_err = 0.0, bulk_rel_rms = 0.0;
  // The expected output error (--act-stats, weights w_j = E[x_j^2] of the tensor's columns):
  // output_sum_sq = sum w_j x^2, output_sum_sq_err = sum w_j (dq - x)^2 (out_err), over the
  // elements sum_sq covers. Without statistics (output_weighted false) both are 0 and
  // output_rel_rms / output_sqnr_db are rel_rms / sqnr_db (isotropic activations).
  bool output_weighted = false;
  double output_sum_sq = 0.0, output_sum_sq_err = 0.0, output_rel_rms = 0.0, output_sqnr_db = 0.0;
  double bits_per_element = 0.0;
  double bytes = 0.0;  // elements x bits_per_element / 8
  scan_worked_block worst;
};

struct scan_tensor {
  std::string name, dtype;
  std::vector<std::uint64_t> shape;
  std::int64_t rows = 0, cols = 0;
  std::string layer_type;  // q_proj, k_proj, ..., embeddings, lm_head, norms, other
  int layer = -1;          // from "layers.12." and the like; -1 when absent
  double bulk_below = 0.0;  // the bulk bound (scan_bulk.cpp), the same for every scheme
  std::string act_stats;    // the --act-stats tensor that weighted it; "" = none
  // Its place among the selected tensors in the checkpoint's pass order: ties in the ranking keep
  // this order, and a merge of shards restores it before ranking.
  std::int64_t position = 0;
  std::vector<scan_scheme_result> results;  // one per options.schemes, same order
};

// The value of rank key k for one scheme's result: sqnr_db, flushed_frac, outlier_flushed_frac,
// bulk_rel_rms or output_rel_rms. Lower is worse for sqnr only.
[[nodiscard]] double rank_value(const scan_scheme_result& r, scan_rank k);

// Aggregate over a group of tensors, for one scheme.
struct scan_group {
  std::string key;
  std::int64_t tensors = 0, elements = 0;
  double sum_sq = 0.0, sum_sq_err = 0.0, sqnr_db = 0.0, rel_rms = 0.0;
  std::int64_t flushed = 0, clipped = 0, outlier_blocks = 0;
  double bytes = 0.0;
  std::string worst_tensor;  // lowest SQNR in the group
  double worst_sqnr_db = 0.0;
};

struct scan_report {
  scan_options options;
  std::vector<scan_tensor> tensors;  // ranked worst first by options.rank_by, primary scheme
  // Per scheme (same order as options.schemes): groups by layer type and by depth, and totals.
  std::vector<std::vector<scan_group>> by_type, by_depth;
  std::vector<scan_group> totals;
  double source_bytes = 0.0;  // the scanned tensors' bytes as stored
  std::vector<std::string> skipped;  // "name (reason)"
  // With --act-stats: the scanned tensors that have no statistics in the file (scan order), and
  // how many of the file's tensors weighted no scanned tensor.
  std::vector<std::string> without_act_stats;
  std::size_t act_stats_unused = 0;
  double seconds = 0.0;
  double bytes_read = 0.0;
};

// Layer type and depth parsed from a tensor name (documented in scan_probe.cpp).
[[nodiscard]] std::string layer_type_of(const std::string& name);
[[nodiscard]] int layer_index_of(const std::string& name);

// Quantizes a [rows, cols] tensor given by `fetch(first_row, rows, out)` band by band.
// Exposed for tests: the banded result equals formats::quantize on the whole tensor.
[[nodiscard]] scan_scheme_result scan_tensor_scheme(
    const std::string& scheme, std::int64_t rows, std::int64_t cols,
    const std::function<void(std::int64_t, std::int64_t, std::span<double>)>& fetch,
    std::int64_t band_elements);

// The same for elements stored in memory (a checkpoint's memory map), row-major, read in
// place: f64, f32, bf16 and f16 (other dtypes: use the fetch form). Schemes the fused
// quantizer covers (src/formats/rne_block_quantizer.hpp) never decode a band to doubles.
// `release(first_byte, bytes)`, when given, is called for each band's bytes (relative to
// `data`) once the pass that reads them is done.
[[nodiscard]] scan_scheme_result scan_tensor_scheme(
    const std::string& scheme, std::int64_t rows, std::int64_t cols, const std::byte* data,
    io::dtype type, std::int64_t band_elements,
    const std::function<void(std::size_t, std::size_t)>& release = {});

// Throws numprobe::error (exit 2) on unreadable checkpoints, bad regexes, unknown schemes.
[[nodiscard]] scan_report run_scan(const scan_options& o);

[[nodiscard]] nlohmann::json to_json(const scan_report& r);
// The inverse of to_json on a scan document (a command document's top level): every field the
// reports read, exact (JSON numbers round-trip doubles). Throws numprobe::error (exit 2) naming
// `place` on a field that is missing or of the wrong type.
[[nodiscard]] scan_report scan_from_json(const nlohmann::json& j, const std::string& place);

// Which shard of `count` each tensor falls in, given the tensors' names and stored bytes: the
// tensors sorted by name are laid end to end, and a tensor goes to the shard its middle byte
// falls in (shard k holds the bytes [k B/N, (k+1) B/N) of the B bytes), so each shard holds
// about 1/N of the bytes and every tensor is in exactly one shard. Same order as `names`.
[[nodiscard]] std::vector<int> scan_shard_of(const std::vector<std::string>& names,
                                             const std::vector<std::uint64_t>& bytes, int count);

// `numprobe merge` of `scan --shard i/N` documents: the tensors of all N shards in the pass order,
// ranked and grouped as one scan (so the report is the unsharded one's). Throws numprobe::error
// (exit 2) naming the place of a part that is not a shard of the same scan, repeats a shard or
// leaves one out.
[[nodiscard]] scan_report merge_scan_shards(const std::vector<scan_report>& parts,
                                            const std::vector<std::string>& places);
// One row per tensor and scheme.
[[nodiscard]] result::table data_table(const scan_report& r);

// The result model: the worst tensor per per-tensor metric and the totals, a gate per bound
// (worst tensor, or the total), the NaN/Inf gate, the ranked table; to_json(r) as details.
void fill_result(const scan_report& r, const scan_options& o, const std::vector<bound>& bounds,
                 bool allow_nonfinite, result::check_result& out);
// The metrics a scan bound may name: per tensor (worst tensor) and totals ("total.*").
[[nodiscard]] const std::vector<std::string>& scan_tensor_metric_names();
[[nodiscard]] const std::vector<std::string>& scan_total_metric_names();
[[nodiscard]] bool scan_metric_known(const std::string& metric);

}  // namespace numprobe::probes
