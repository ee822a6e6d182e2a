#pragma once
// The layout readers behind numprobe::io::release (numprobe/io/release.hpp): one entry per
// layout, each with its detection, grouping and slab decode. release.cpp detects and
// dispatches; release_float.cpp holds the floating-point layouts (NVFP4, MXFP4, fp8),
// release_int.cpp the integer ones (AWQ, GPTQ, compressed-tensors pack-quantized).
//
// Private to numprobe: not installed.
#include <vector>

#include <nlohmann/json.hpp>

#include "numprobe/io/release.hpp"

namespace numprobe::io::detail {

struct layout_reader {
  release_layout id;
  // Whether config.json's quantization_config (an object) names this layout.
  bool (*config_matches)(const nlohmann::json& qc);
  // Whether the tensor names and dtypes are this layout's (used without a config.json).
  bool (*names_match)(const checkpoint& ck);
  // One release_tensor per quantized weight (every shape and dtype checked: exit 2 naming the
  // tensor), every other tensor name into passthrough. qc may be null.
  void (*group)(const checkpoint& ck, const nlohmann::json& qc, std::vector<release_tensor>& out,
                std::vector<std::string>& passthrough);
  // Rows [r0, r1) of t (release::decode_rows has checked the bounds and alignment).
  release_slab (*decode)(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                         std::int64_t r1);
};

// The readers of each file, appended in all_release_layouts() order.
void add_float_layouts(std::vector<layout_reader>& out);
void add_int_layouts(std::vector<layout_reader>& out);

// GGUF (release_gguf.cpp): rows [r0, r1) of t, exact values in the stored row order; codes
// empty, scales the blocks' stored f16 scale d where the type has one.
[[nodiscard]] release_slab decode_gguf_rows(const gguf_file& f, const release_tensor& t, std::int64_t r0,
                                            std::int64_t r1);

// Every reader, detection order first-match (float layouts first).
[[nodiscard]] const std::vector<layout_reader>& layout_readers();

}  // namespace numprobe::io::detail
