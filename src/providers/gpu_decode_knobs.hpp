#pragma once
// The serving knobs (provider_options::knobs, the CLI's --decode/--splits/... flags) the
// built-in GPU kernels honour: split-KV decode with a split count or a split size, an e4m3fn KV
// cache with per-tensor or per-KV-head scales, FP8 P and the accumulator promotion. Anything
// else is refused naming its flag.
#include <cstdint>
#include <string>
#include <vector>

#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {

struct decode_settings {
  bool on = false;
  int splits = 4;                // --splits (the emulator's default)
  std::int64_t split_size = 0;   // --split-size: keys per split (then splits = ceil(S / size))
  gpu::kv_format kv = gpu::kv_format::m_input;
  bool p_e4m3 = false;       // --p-format e4m3fn
  double p_prescale = 1.0;   // --p-prescale
  int acc_promote = 0;       // --acc-promote N
  [[nodiscard]] std::string kv_name() const;
  // "decode,splits=4,kv=e4m3fn/head,..." for the provider's name.
  [[nodiscard]] std::string describe() const;
};

// Input errors (exit 2) name the flag; `vendor` ("cuda" | "hip") is named in them.
[[nodiscard]] decode_settings parse_decode_knobs(const provider_options& o, const std::string& vendor);

// e4m3fn codes of x ([B*S, Hkv, D], n elements) with s = fp32(amax / 448) per tensor or per KV
// head (1 when the group is all zero), round to nearest even, saturating: the emulator's FP8 KV.
void quantize_kv_e4m3(const float* x, std::int64_t n, std::int64_t hkv, std::int64_t d,
                      bool per_head, std::vector<std::uint8_t>& codes, std::vector<float>& scales);

}  // namespace numprobe
