#pragma once
// The target layouts of `convert --write` (convert_probe.hpp): the tensors one converted weight
// becomes, and the quantization_config block that makes the release readers
// (numprobe/io/release.hpp) detect the written checkpoint. Each is the layout the reader of the
// same name decodes (docs/checkpoints.md), so a written checkpoint reads back bit for bit.
//   modelopt-nvfp4  nvfp4:        P.weight U8 [.., in/2] (low nibble first), P.weight_scale F8_E4M3
//                                 [.., in/16], P.weight_scale_2 F32 [] (s_t)
//   ct-mxfp4        mxfp4:        P.weight_packed U8 [.., in/2], P.weight_scale U8 [.., in/32] (e8m0)
//   deepseek-fp8    fp8-block128: P.weight F8_E4M3 [out, in], P.weight_scale_inv F32
//                                 [ceil(out/128), ceil(in/128)]
//   ct-fp8          fp8-channel:  P.weight F8_E4M3 [out, in], P.weight_scale F32 [out, 1]
//   bf16            any scheme:   P.weight BF16, the converted values rounded to nearest even
// (P is the weight's base name less its trailing ".weight".)
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "numprobe/formats/scheme.hpp"
#include "numprobe/io/dtype.hpp"

namespace numprobe::probes {

// What one output tensor holds.
enum class out_part : std::uint8_t {
  m_codes,         // element codes (e2m1 packed two per byte, low nibble first; 8-bit one per byte)
  m_scale_codes,   // 8-bit block scale codes (e4m3, e8m0), block grid row-major
  m_scale_values,  // block scales as F32 values, block grid row-major
  m_tensor_scale,  // NVFP4's s_t, F32 scalar
  m_bf16,          // the converted values as BF16
};

struct out_tensor {
  std::string name;
  io::dtype dtype = io::dtype::m_u8;
  std::vector<std::uint64_t> shape;
  out_part part = out_part::m_codes;
};

// The layout for a target scheme: `requested` "" picks the scheme's own, "bf16" the dequantized
// one, otherwise a layout name above. Throws numprobe::error (exit 2) naming --write-layout when
// the layout cannot hold the scheme (e.g. e4m3fnuz, which no public layout stores: bf16 only).
[[nodiscard]] std::string choose_write_layout(const std::string& requested, const formats::scheme_config& c,
                                              const std::string& scheme_name);

// The output tensors of one weight (base name, logical shape [.., in]); throws (exit 2) naming
// the tensor when its shape does not fit the layout (an odd in for packed fp4, in not a multiple
// of the block).
[[nodiscard]] std::vector<out_tensor> layout_tensors(const std::string& layout, const std::string& base,
                                                     const std::vector<std::uint64_t>& shape,
                                                     const formats::scheme_config& c);

// config.json's quantization_config for the layout (null for bf16).
[[nodiscard]] nlohmann::json layout_quantization_config(const std::string& layout, const formats::scheme_config& c);

}  // namespace numprobe::probes
