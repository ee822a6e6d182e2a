#pragma once
// The fp8 KV cache's scales (issue 9), one rule for the emulated kernels and the kvcache study:
// scale groups per layout (tensor, KV head, channel, token), each group's amax, its fp32 scale
// s = mult * amax / max_finite, and one element's code (RNE, saturating at the format's max).
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "src/kernels/emu/flash_attention.hpp"  // kv_scale_layout

namespace numprobe::emu {

// A K or V tensor laid out [batch * seq, kv_heads, head_dim].
struct kv_shape {
  std::int64_t batch = 1, seq = 0, kv_heads = 1, head_dim = 1;
};

[[nodiscard]] std::int64_t kv_scale_groups(kv_scale_layout l, const kv_shape& s);
// The scale group of element (member b, position pos, KV head g, channel d).
[[nodiscard]] std::int64_t kv_scale_index(kv_scale_layout l, const kv_shape& s, std::int64_t b, std::int64_t pos,
                                          std::int64_t g, std::int64_t d);

// The amax of every scale group of x. Static layouts (tensor, head, channel) see the first
// `calib` positions of each member (a serving stack calibrates them on a prefix; the default is
// the whole length); token scales see every position, as each token is written.
[[nodiscard]] std::vector<double> kv_amax(kv_scale_layout l, const kv_shape& s, std::span<const double> x,
                                          std::int64_t calib = std::numeric_limits<std::int64_t>::max());

// A group's scale held in fp32 as kernels hold it: fp32(mult * amax / max_finite(f)); 1 where
// the group is all zero.
[[nodiscard]] double kv_scale(formats::format_id f, double amax, double mult = 1.0);

// x's fp8 code against scale s (RNE, saturating at max_finite); the cache reads back code * s.
[[nodiscard]] double kv_code(formats::format_id f, double x, double s);

}  // namespace numprobe::emu
