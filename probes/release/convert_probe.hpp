#pragma once
// `numprobe convert RELEASE --to SCHEME [--format F] [--write OUT]` (issue 18 item 3): re-quantize
// a released checkpoint (numprobe/io/release.hpp) for hardware that lacks its format, e.g. NVFP4
// -> MXFP4 or -> fp8 for a GPU without NVFP4, MXFP4 -> e4m3fnuz block fp8 for MI300, fp8 fn ->
// fnuz. The release's exact decoded values are quantized again by numprobe's reference
// (formats::quantize, under the given conventions) slab by slab; a per-tensor scale (NVFP4's s_t)
// comes from a first amax pass and is imposed on every slab, as the scan does.
//
// Reports, per tensor, the error the conversion adds against the release (the release's
// values are the reference), and with --against ORIGINAL the release's and the converted
// tensor's errors against the original.
//
// A GGUF release (llama.cpp) converts to a safetensors layout an engine reads: the decoder
// blocks' linears are quantized, every other tensor (embedding, lm_head, norms) is written as
// its F32 values; names become Hugging Face's and llama's Q/K rows leave llama.cpp's rotary order
// (io::original_row); config.json is made from the GGUF's metadata (llama family).
//
// --write OUT writes a sharded .safetensors checkpoint (model-0000K-of-0000N.safetensors and
// model.safetensors.index.json) in the target's layout (convert_write.hpp), with config.json's
// quantization_config set to that layout, every unquantized tensor copied as stored. Each file is
// written atomically; OUT must not exist or be empty, and never holds the release.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/io/release.hpp"

namespace numprobe::probes {

struct convert_options {
  std::string release, against;
  std::optional<io::release_layout> layout;  // --layout: the release's
  std::string filter;                        // ECMAScript regex on base names ("" = all)
  std::string target_name;                   // the scheme name (--to), as given
  // --to dequant: no re-quantization; --write writes every tensor's decoded values as F32 under
  // the release's own names and shapes (a GGUF's rows in its stored order), passthrough tensors
  // of a floating dtype as F32 too (others as stored).
  bool dequant = false;
  formats::scheme_config target;             // resolved: scheme, --format, conventions
  std::string write;                         // OUT folder; "" = report only
  std::string write_layout;                  // "" = the target's layout; "bf16" = dequantized
  std::uint64_t shard_bytes = std::uint64_t{4} << 30;
  std::vector<bound> bounds;  // on the worst tensor: added_sqnr_db, added_rel_rms, ...
  // NaN or Inf among the release's decoded weights (a NaN scale, a NaN code) is a finding (exit
  // 1, the gate nonfinite<=0; the tensor's added metrics are NaN, which holds no bound) unless
  // allowed (`--allow-nonfinite`: reported, not gated). --write refuses such a release either way
  // (exit 2 naming the tensor), before it creates anything: a converted checkpoint would carry them.
  bool allow_nonfinite = false;
};

struct convert_error {
  double sqnr_db = 0.0, rel_rms = 0.0, max_abs = 0.0;
  std::int64_t flushed = 0;  // non-zero reference values that become 0
};

struct convert_tensor_report {
  std::string name, from_scheme;
  std::int64_t rows = 0, cols = 0;
  convert_error added;  // converted against the release (NaN when the release holds NaN/Inf)
  std::int64_t nonfinite = 0;  // decoded release values that are NaN or Inf
  std::optional<convert_error> release_vs_original, converted_vs_original;
  // Written as F32 values (--to dequant, a GGUF's unquantized tensors): elements whose decoded
  // value float32 does not hold exactly (an NVFP4 e2m1 x e4m3 x f32 product can need 29 bits).
  bool as_values = false;
  std::int64_t f32_inexact = 0;
  std::string written_as;  // the output name when it differs (GGUF -> Hugging Face names)
};

struct convert_report {
  convert_options options;
  std::string layout, detected_by, write_layout;
  std::vector<convert_tensor_report> tensors;
  std::vector<std::string> files;  // written, under OUT
  std::uint64_t bytes_written = 0, elements = 0;
  std::size_t passthrough = 0;
  std::vector<std::pair<std::string, double>> breaches;
  std::int64_t nonfinite = 0;                  // decoded NaN/Inf, all tensors
  std::vector<std::string> nonfinite_tensors;  // the tensors that hold them
  double seconds = 0.0;
};

// Throws numprobe::error (exit 2) naming the file, tensor or flag: a release the readers refuse,
// a target the chosen layout cannot hold, OUT not empty or holding the release, an original of
// another shape or a non-floating dtype, NaN/Inf in the original (or, with --write, in the
// release). With --write every tensor is decoded and checked before OUT is created; should the
// write still fail, or SIGINT/SIGTERM/SIGHUP arrive (numprobe::interrupted, exit 128 + signal),
// the files it wrote and their temporaries are removed, and OUT too when convert created it.
[[nodiscard]] convert_report run_convert(const convert_options& o);

// added_sqnr_db (lowest), added_rel_rms, added_max_abs, added_flushed; with --against
// converted_sqnr_db (lowest), converted_rel_rms. Throws (exit 2) on an unknown name.
[[nodiscard]] double convert_metric(const convert_report& r, const std::string& name);

[[nodiscard]] nlohmann::json to_json(const convert_report& r);
void fill_result(const convert_report& r, result::check_result& out);

}  // namespace numprobe::probes
