#pragma once
// The quant probe: quantize one tensor with a format and a block-scaling scheme, and say where
// precision goes: error, flushes, clipping, scale underflow, and the outlier blocks whose
// largest element forced its neighbours to zero (with a worked block).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/result.hpp"
#include "numprobe/core/bound.hpp"
#include "numprobe/formats/scheme.hpp"
#include "probes/quant/quant_gemm.hpp"
#include "probes/quant/quant_inputs.hpp"

namespace numprobe::probes {

struct quant_probe_options {
  std::string scheme_name = "nvfp4";
  formats::scheme_config config;  // the scheme's defaults with the flags applied
  std::string input;              // PATH[:TENSOR]; empty: a synthetic tensor
  std::int64_t rows = 0, cols = 0;  // synthetic shape, or a reshape of the input (0: as stored)
  quant_dist dist = quant_dist::m_llm;
  std::uint64_t seed = 7;
  std::vector<bound> bounds;
  std::size_t worst_count = 5;
  std::string backend = "ref";  // ref | cuda | hip | exec:CMD: also check that kernel bit for bit
  int device = 0;
  double exec_timeout_s = 60.0;  // exec:CMD only (--exec-timeout, --keep)
  bool keep_temp = false;
  quant_gemm_options gemm;  // --gemm TOKENS --acc-model NAME [--acc-promote N]
};

struct quant_metrics {
  std::int64_t elements = 0;
  double sqnr_db = 0.0;   // 10 log10(sum x^2 / sum (x - q)^2) over finite inputs
  double rel_rms = 0.0;   // sqrt(sum (x - q)^2 / sum x^2)
  double max_abs = 0.0;
  double max_rel = 0.0;   // over non-zero finite inputs
  std::int64_t flushed = 0, clipped = 0, scale_underflow_blocks = 0;
  std::int64_t nan_inputs = 0, inf_inputs = 0;
  std::int64_t nonfinite_outputs = 0;  // finite inputs that dequantized to NaN/inf (overflow)
  std::int64_t blocks = 0;
  // Outlier flushes: flushed elements that would have survived had the scale been set by the
  // block's second-largest magnitude; an outlier block holds at least one.
  std::int64_t outlier_blocks = 0;
  std::int64_t outlier_flushed = 0;
  double bits_per_element = 0.0;
  // --gemm (quant_gemm.hpp): the dequant GEMM through the MMA model.
  double gemm_acc_rel_rms = 0.0, gemm_fp32_acc_rel_rms = 0.0, gemm_acc_ratio = 0.0, gemm_rel_rms = 0.0;
  std::int64_t gemm_nonfinite = 0;
};

// A block shown element by element (truncated to `k_worked_max` elements).
struct worked_block {
  std::int64_t index = -1;
  formats::block_stats stats;
  std::vector<std::int64_t> flat;  // element indices
  std::vector<double> input, dequant;
  std::vector<std::uint32_t> codes;
  bool truncated = false;
};
inline constexpr std::size_t k_worked_max = 64;

struct quant_breach {
  std::string bound;
  double measured = 0.0;
};

struct quant_report {
  std::string case_id;
  quant_probe_options options;
  std::vector<std::uint64_t> input_shape;  // as read or generated
  formats::quant_result result;
  std::vector<double> input;
  quant_metrics metrics;
  std::vector<std::int32_t> outlier_flushes;  // per block
  std::vector<std::int64_t> worst_blocks;      // block indices, worst first
  worked_block worked;                     // the worst outlier block (else the max-error one)
  std::vector<quant_breach> breaches;
  double seconds = 0.0;
  nlohmann::json device_check;  // --backend cuda|hip: device vs reference codec (null for ref)
  quant_gemm_report gemm;       // --gemm
};

// The value of a named metric, for --bound; throws an input error on an unknown name.
[[nodiscard]] double quant_metric(const quant_metrics& m, const std::string& name);
// The metrics every quant result reports (and bounds may name).
[[nodiscard]] const std::vector<std::string>& quant_metric_names();
// The metrics a result with --gemm adds (gemm_acc_rel_rms, ...): a bound on one needs --gemm.
[[nodiscard]] const std::vector<std::string>& quant_gemm_metric_names();

// Reads or generates the input, then analyze_quant.
[[nodiscard]] quant_report run_quant(const quant_probe_options& o);
// Quantizes and measures a given row-major [rows, cols] tensor (the timed part in bench_quant).
[[nodiscard]] quant_report analyze_quant(const quant_probe_options& o, std::vector<double> input,
                                         std::int64_t rows, std::int64_t cols);

[[nodiscard]] nlohmann::json to_json(const quant_report& r);

// --backend cuda|hip (probes/quant/quant_device.cpp): quantizes on the device, compares codes, scales,
// zero points and the tensor scale with the reference bit for bit into r.device_check, and adds
// a "bit_exact" breach on any mismatch. Throws input (exit 2) / backend (exit 3) errors.
void check_quant_on_device(const quant_probe_options& o, quant_report& r, std::int64_t rows,
                           std::int64_t cols);
// The device check as report lines (empty for ref).
[[nodiscard]] std::string device_check_text(const quant_report& r);

// Writes codes.npy (one unpacked code per element), scales.npy (as stored: uint8 codes for
// e4m3/e8m0 scales, float32 otherwise), dequant.npy (float32) and, for zero-point schemes,
// zero_points.npy (uint8) into `dir` (created when missing).
void write_quant_dump(const quant_report& r, const std::string& dir);

// The result model (metrics, gates, tables, curves; to_json as details), shared by the command
// and the scenario runner.
void fill_result(const quant_report& r, const std::vector<bound>& bounds, bool allow_nonfinite, result::check_result& out);

}  // namespace numprobe::probes
