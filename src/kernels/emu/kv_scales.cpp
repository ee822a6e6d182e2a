// The fp8 KV cache's scales (see kv_scales.hpp).
#include "src/kernels/emu/kv_scales.hpp"

#include <algorithm>
#include <cmath>

namespace numprobe::emu {

std::int64_t kv_scale_groups(kv_scale_layout l, const kv_shape& s) {
  switch (l) {
    case kv_scale_layout::m_tensor: return 1;
    case kv_scale_layout::m_head: return s.kv_heads;
    case kv_scale_layout::m_channel: return s.kv_heads * s.head_dim;
    case kv_scale_layout::m_token: return s.batch * s.seq * s.kv_heads;
  }
  return 1;
}

std::int64_t kv_scale_index(kv_scale_layout l, const kv_shape& s, std::int64_t b, std::int64_t pos, std::int64_t g,
                            std::int64_t d) {
  switch (l) {
    case kv_scale_layout::m_tensor: return 0;
    case kv_scale_layout::m_head: return g;
    case kv_scale_layout::m_channel: return g * s.head_dim + d;
    case kv_scale_layout::m_token: return (b * s.seq + pos) * s.kv_heads + g;
  }
  return 0;
}

std::vector<double> kv_amax(kv_scale_layout l, const kv_shape& s, std::span<const double> x, std::int64_t calib) {
  std::vector<double> amax(static_cast<std::size_t>(kv_scale_groups(l, s)), 0.0);
  const std::int64_t n = l == kv_scale_layout::m_token ? s.seq : std::min(calib, s.seq);
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t pos = 0; pos < n; ++pos)
      for (std::int64_t g = 0; g < s.kv_heads; ++g)
        for (std::int64_t d = 0; d < s.head_dim; ++d) {
          const double v = std::fabs(x[static_cast<std::size_t>(((b * s.seq + pos) * s.kv_heads + g) * s.head_dim + d)]);
          double& a = amax[static_cast<std::size_t>(kv_scale_index(l, s, b, pos, g, d))];
          if (v > a) a = v;
        }
  return amax;
}

double kv_scale(formats::format_id f, double amax, double mult) {
  return amax > 0 ? static_cast<double>(static_cast<float>(mult * amax / formats::info(f).max_finite)) : 1.0;
}

double kv_code(formats::format_id f, double x, double s) {
  return formats::round_to(f, x / s, formats::rounding::m_nearest_even, formats::overflow::m_saturate);
}

}  // namespace numprobe::emu
