// Quantization conventions by name (numprobe/formats/conventions.hpp).
#include "numprobe/formats/conventions.hpp"

#include <array>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/scheme.hpp"

namespace numprobe::formats {
namespace {

template <class E, std::size_t N>
E parse_named(std::string_view text, const std::array<E, N>& all, const std::string& place) {
  std::string known;
  for (E v : all) {
    if (name(v) == text) return v;
    known += (known.empty() ? "" : ", ") + std::string(name(v));
  }
  throw_input_error(place, "unknown value '" + std::string(text) + "' (known: " + known + ")");
}

constexpr std::array k_divisions{scale_division::m_exact, scale_division::m_reciprocal,
                                 scale_division::m_reciprocal_approx};
constexpr std::array k_floors{scale_floor::m_subnormal, scale_floor::m_min_normal};
constexpr std::array k_ariths{scale_arith::m_double, scale_arith::m_fp32};
constexpr std::array k_rules{mx_rule::m_floor, mx_rule::m_ceil, mx_rule::m_rceil, mx_rule::m_even,
                             mx_rule::m_nearest};

}  // namespace

std::string_view name(scale_division d) {
  switch (d) {
    case scale_division::m_exact: return "exact";
    case scale_division::m_reciprocal: return "reciprocal";
    case scale_division::m_reciprocal_approx: return "reciprocal-approx";
  }
  return "?";
}

std::string_view name(scale_floor f) {
  return f == scale_floor::m_subnormal ? "subnormal" : "min-normal";
}

std::string_view name(scale_arith a) { return a == scale_arith::m_double ? "double" : "fp32"; }

scale_division parse_scale_division(std::string_view text, const std::string& place) {
  return parse_named(text, k_divisions, place);
}
scale_floor parse_scale_floor(std::string_view text, const std::string& place) {
  return parse_named(text, k_floors, place);
}
scale_arith parse_scale_arith(std::string_view text, const std::string& place) {
  return parse_named(text, k_ariths, place);
}

std::vector<std::pair<std::string_view, std::string_view>> convention_values(const scheme_config& c) {
  if (c.kind == scheme_kind::m_nvfp4)
    return {{"scale_division", name(c.conv.division)},
            {"scale_floor", name(c.conv.floor)},
            {"scale_arith", name(c.conv.arith)}};
  if (c.kind == scheme_kind::m_mx) return {{"rule", name(c.rule)}};
  return {};
}

std::string conventions_text(const scheme_config& c) {
  std::string s;
  for (const auto& [axis, value] : convention_values(c))
    s += (s.empty() ? "" : " ") + std::string(axis) + "=" + std::string(value);
  return s.empty() ? "none" : s;
}

std::vector<scheme_config> convention_variants(const scheme_config& base) {
  std::vector<scheme_config> out{base};
  const auto add = [&](scheme_config v) {
    if (!(v.conv == base.conv && v.rule == base.rule)) out.push_back(v);
  };
  if (base.kind == scheme_kind::m_nvfp4) {
    for (auto d : k_divisions)
      for (auto f : k_floors)
        for (auto a : k_ariths) {
          scheme_config v = base;
          v.conv = {d, f, a};
          add(v);
        }
  } else if (base.kind == scheme_kind::m_mx) {
    for (auto r : k_rules) {
      scheme_config v = base;
      v.rule = r;
      add(v);
    }
  }
  return out;
}

const std::vector<convention_preset>& all_convention_presets() {
  using sd = scale_division;
  using sf = scale_floor;
  using sa = scale_arith;
  const auto rule = [](mx_rule r) { return static_cast<std::uint8_t>(r); };
  // docs/quant-conventions.md gives each one's file and function, and what the axes leave out.
  static const std::vector<convention_preset> presets{
      {"ocp", "OCP Microscaling Formats (MX) v1.0, section 6.3; NVFP4 as defined (NUMERICS.md)",
       {sd::m_exact, sf::m_subnormal, sa::m_double}, rule(mx_rule::m_floor)},
      {"modelopt", "NVIDIA/TensorRT-Model-Optimizer modelopt/torch/quantization/qtensor/{nvfp4,mxfp4}_tensor.py",
       {sd::m_exact, sf::m_subnormal, sa::m_double}, rule(mx_rule::m_rceil)},
      {"torchao", "pytorch/ao torchao/prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize; mx_tensor.py to_mx",
       {sd::m_reciprocal, sf::m_min_normal, sa::m_fp32}, rule(mx_rule::m_floor)},
      {"compressed-tensors",
       "vllm-project/compressed-tensors quantization/utils/helpers.py, lifecycle/forward_helpers.py; "
       "quantization/utils/mxfp_utils.py generate_mx_scales (MX: round_to_power_2, then floor)",
       {sd::m_exact, sf::m_subnormal, sa::m_fp32}, rule(mx_rule::m_even)},
      {"trtllm", "TensorRT-LLM kernels/quantization_utils.cuh cvt_warp_fp16_to_fp4 (as vendored by flashinfer)",
       {sd::m_reciprocal_approx, sf::m_subnormal, sa::m_fp32}, rule(mx_rule::m_rceil)},
      {"flashinfer", "flashinfer-ai/flashinfer csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh",
       {sd::m_reciprocal_approx, sf::m_subnormal, sa::m_fp32}, rule(mx_rule::m_rceil)},
      {"cublas", "cuBLAS documentation, 'Computing scaling and conversion factors for FP8 with UE8M0 scales'",
       {sd::m_exact, sf::m_subnormal, sa::m_double}, rule(mx_rule::m_rceil)},
  };
  return presets;
}

void apply_convention_preset(std::string_view preset, scheme_config& c, const std::string& place) {
  std::string known;
  for (const auto& p : all_convention_presets()) {
    if (p.name == preset) {
      if (c.kind == scheme_kind::m_nvfp4) c.conv = p.nvfp4;
      if (c.kind == scheme_kind::m_mx) c.rule = static_cast<mx_rule>(p.mx_rule);
      return;
    }
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw_input_error(place, "unknown preset '" + std::string(preset) + "' (known: " + known + ")");
}

}  // namespace numprobe::formats
