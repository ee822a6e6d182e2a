#pragma once
// Released quantized checkpoints (issue 18): the layouts other tools publish, read to exact
// values. A release is a checkpoint (numprobe/io/checkpoint.hpp) whose quantized weights are
// stored as several tensors under one base name (ModelOpt's `X.weight` + `X.weight_scale` +
// `X.weight_scale_2`, AWQ's `X.qweight` + `X.qzeros` + `X.scales`, ...), beside tensors kept
// unquantized (norms, embeddings). Each layout's rules are cited in docs/checkpoints.md.
//
// Detection: the `quantization_config` block of a config.json beside the checkpoint when there
// is one (quant_method, format, config_groups), else the tensor names and dtypes. `--layout NAME`
// (open's `forced`) overrides it.
//
// Decoding is by row slabs, so a pass over a release keeps O(slab) memory: decode_rows(t, r0,
// r1) returns rows [r0, r1) of the logical [rows, cols] weight. r0 and r1 must be multiples of
// t.row_align (the layout's scale block along rows: 128 for DeepSeek-V3, 1 otherwise), r1 may
// also be t.rows. Every rule and size read from a file is checked: a malformed layout throws
// numprobe::error (exit 2) naming the tensor (a wrong scale shape, a missing global scale, an
// odd K, a packed size that does not match).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "numprobe/formats/scheme.hpp"
#include "numprobe/io/checkpoint.hpp"

namespace numprobe::io {

enum class release_layout : std::uint8_t {
  m_modelopt_nvfp4,  // weight u8 (2 e2m1, low nibble first), weight_scale e4m3 /16, weight_scale_2 f32
  m_ct_nvfp4,        // compressed-tensors nvfp4-pack-quantized: weight_packed, weight_scale, weight_global_scale
  m_ct_mxfp4,        // compressed-tensors mxfp4-pack-quantized: weight_packed, weight_scale (e8m0 as u8)
  m_ct_fp8,          // compressed-tensors float-quantized: fp8 weight, weight_scale per tensor/channel/block
  m_ct_int4,         // compressed-tensors pack-quantized: int4 in int32, weight_scale per group, weight_zero_point
  m_gptoss_mxfp4,    // gpt-oss: *_blocks u8 [.., G, 16], *_scales u8 e8m0 [.., G]
  m_deepseek_fp8,    // DeepSeek-V3: weight e4m3fn, weight_scale_inv [ceil(M/128), ceil(N/128)]
  m_awq,             // AWQ GEMM: qweight i32 (order 0,2,4,6,1,3,5,7), qzeros, scales
  m_gptq_v1,         // GPTQ: qweight i32 packed along K, qzeros stored minus 1, scales, g_idx
  m_gptq_v2,         // GPTQ v2: zeros stored as they are
  m_modelopt_fp8,    // ModelOpt FP8 / FP8_PER_CHANNEL_PER_TOKEN / FP8_PB_WO: weight e4m3fn, weight_scale f32
  m_gguf,            // llama.cpp's GGUF file (numprobe/io/gguf.hpp): every tensor in its ggml type
};

[[nodiscard]] std::string_view name(release_layout l);
// Throws numprobe::error (exit 2) naming `place` and the known names.
[[nodiscard]] release_layout parse_release_layout(std::string_view text,
                                                  const std::string& place = "--layout");
[[nodiscard]] const std::vector<release_layout>& all_release_layouts();

// One quantized weight of a release: what was found, and how it decodes.
struct release_tensor {
  std::string name;        // the base name as the original checkpoint names the weight,
                           // e.g. "model.layers.0.mlp.up_proj.weight"
  release_layout layout{};
  std::int64_t rows = 0, cols = 0;  // the logical weight [rows, cols] = [out, in]; 3-D expert
                                    // tensors [E, out, in] are E*out rows
  std::vector<std::uint64_t> shape;  // the logical shape as the original holds it
  std::int64_t row_align = 1;        // decode_rows boundaries (see above)
  // The numprobe scheme that describes the stored codes (for scan --against's identify and for
  // convert): nvfp4, mxfp4, fp8-tensor / fp8-channel / fp8-block128, int4 groups or int4-awq.
  std::string scheme_name;
  formats::scheme_config scheme;
  // GGUF: the ggml type the tensor is stored in ("Q4_1", "Q6_K", "F32"); "" for other layouts.
  std::string stored_as;
  // The tensor's name in a Hugging Face checkpoint when the release names it otherwise (GGUF's
  // blk.3.attn_q.weight is model.layers.3.self_attn.q_proj.weight for the llama family); "" when
  // the release uses the original's names or no mapping is known. scan/convert --against and
  // convert --write to a safetensors layout use it.
  std::string original_name;
  // Rows stored in llama.cpp's rotary order (GGUF Q and K of architecture llama: the converter's
  // permute()): the number of heads it ran over; 0 when rows are in the original's order.
  // original_row() maps a stored row to the original's; row_align is then the head's row count,
  // so a slab holds whole heads.
  std::int64_t rope_heads = 0;
  // The record of what was read: source tensor names, dtypes, shapes, the rules applied
  // (e.g. "global_scale inverted", "zeros stored minus 1"), as JSON for reports.
  nlohmann::json record;
};

// Rows [r0, r1) of one release tensor, decoded.
struct release_slab {
  std::int64_t r0 = 0, r1 = 0, cols = 0;
  std::vector<double> values;        // exact dequantized values, [r1 - r0, cols] row-major
  std::vector<std::uint32_t> codes;  // unpacked element codes as numprobe's codec numbers them
                                     // (formats::encode of scheme.element), [r1 - r0, cols]
  // Stored scales of the blocks these rows cover, block grid row-major over the slab's rows
  // (the scheme's grid: formats::quantize's block order), as exact values and as the scale
  // format's codes.
  std::vector<double> scales;
  std::vector<std::uint32_t> scale_codes;
  std::vector<int> zero_points;      // asymmetric int4: per block, same order; empty otherwise
  double tensor_scale = 1.0;         // NVFP4's s_t as numprobe defines it (dequant = e2m1 * s_b * s_t)
};

// The original's row of stored row r of t: r itself unless t.rope_heads > 0, where llama.cpp's
// converter stored row h*d + 2i + s from original row h*d + s*d/2 + i (d = rows per head).
[[nodiscard]] std::int64_t original_row(const release_tensor& t, std::int64_t r);

// The name an original checkpoint gives t: original_name, else name.
[[nodiscard]] inline const std::string& original_name_of(const release_tensor& t) {
  return t.original_name.empty() ? t.name : t.original_name;
}

class gguf_file;

class release {
 public:
  // PATH is a .safetensors file, an index .json or a folder holding either (and config.json), or
  // a GGUF file (detected by its magic; or a folder holding one .gguf file and no safetensors).
  // Throws (exit 2): no quantized tensor found, an unknown or contradictory layout, a malformed
  // quantization_config.
  static release open(const std::filesystem::path& path,
                      std::optional<release_layout> forced = std::nullopt);

  [[nodiscard]] release_layout layout() const noexcept { return m_layout; }
  // How the layout was decided: "--layout", "config.json quantization_config (...)" or
  // "tensor names (...)".
  [[nodiscard]] const std::string& detected_by() const noexcept { return m_detected_by; }
  [[nodiscard]] const std::vector<release_tensor>& tensors() const noexcept { return m_tensors; }
  // Tensors of the checkpoint that are not part of a quantized weight (kept as stored).
  [[nodiscard]] const std::vector<std::string>& passthrough() const noexcept { return m_passthrough; }
  // The safetensors files (empty for a GGUF release).
  [[nodiscard]] const checkpoint& files() const noexcept { return m_files; }
  // The GGUF file, or nullptr.
  [[nodiscard]] const gguf_file* gguf() const noexcept { return m_gguf.get(); }
  // The config.json quantization_config block, or null.
  [[nodiscard]] const nlohmann::json& quantization_config() const noexcept { return m_qconfig; }

  // Rows [r0, r1) of `t` (one of tensors()). Throws (exit 2) naming the tensor on malformed
  // data found while decoding, or on r0/r1 off the row_align grid.
  [[nodiscard]] release_slab decode_rows(const release_tensor& t, std::int64_t r0,
                                         std::int64_t r1) const;
  // Hands the pages of t's stored tensors back to the kernel (they stay readable: a later
  // decode faults them in again), so a pass over many weights holds one weight's pages at a
  // time instead of the whole mapped release.
  void release_pages(const release_tensor& t) const noexcept;

 private:
  release(checkpoint files) : m_files(std::move(files)) {}
  static release open_gguf(const std::filesystem::path& file);
  checkpoint m_files;
  std::shared_ptr<const gguf_file> m_gguf;
  release_layout m_layout{};
  std::string m_detected_by;
  std::vector<release_tensor> m_tensors;
  std::vector<std::string> m_passthrough;
  nlohmann::json m_qconfig;
};

}  // namespace numprobe::io
