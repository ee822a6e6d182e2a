#pragma once
// `numprobe attention --inputs DIR --candidate O.npy`: judge an output another engine already
// dumped. DIR follows the exec file convention (src/providers/exec_provider_files.hpp):
// case.json plus q, k, v as DIR/q.npy ... (any float dtype numprobe reads, bf16/fp8 as stored;
// 8-bit '<V1' arrays are read as the case's dtype) or as tensors q, k, v of
// DIR/inputs.safetensors. Nothing is run: the candidate is compared with the reference on the
// same inputs, with the full attention report. lse.npy next to the candidate is used when present.
#include <memory>
#include <optional>
#include <string>

#include "numprobe/core/attention_inputs.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::cli {

struct dumped_attention {
  attention_inputs inputs;
  std::unique_ptr<attention_provider> candidate;  // serves the dumped output's rows
};

// Reads DIR and the candidate (default DIR/o.npy). `tile` (from --tile) places the worst rows
// on tiles; without it case.json's "tile": [Bq, Bk] is used, else 64x64 is assumed and said so.
// Throws input errors (exit 2) naming the file and field.
[[nodiscard]] dumped_attention load_dumped_attention(const std::string& dir,
                                                     const std::string& candidate,
                                                     const std::optional<tile_shape>& tile);

}  // namespace numprobe::cli
