#pragma once
// Quantization conventions: the choices on which independent quantizers of one scheme differ
// while all claiming the format's definition (NUMERICS.md, "Conventions that real quantizers
// differ on"; docs/quant-conventions.md gives each axis's arithmetic and each preset's source).
// Each axis is a named value, never a silent choice: a CLI flag, a scenario key, and a field
// of every report. The defaults are the definitions numprobe has always used.
//
// Axes and the schemes they apply to:
//   scale_division  NVFP4  how an element is scaled: exact x / (s_b s_t), or an fp32 reciprocal
//   scale_floor     NVFP4  e4m3 subnormal block scales allowed, or clamped up to 2^-6
//   scale_arith     NVFP4  the block scale in one rounding from double, or fp32 step by step
//   mx_rule         MX     the shared exponent rule (scheme_config::rule, scheme.hpp)
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace numprobe::formats {

enum class scale_division : std::uint8_t {
  m_exact,              // t = x / (s_b s_t), one rounding (the definition; ModelOpt)
  m_reciprocal,         // t = f32(f32(x) * f32(f32(1 / s_t) / s_b)) (torchao)
  m_reciprocal_approx,  // t = f32(f32(x) * rcp(f32(s_b * rcp(f32(1 / s_t))))) (TensorRT-LLM)
};

enum class scale_floor : std::uint8_t {
  m_subnormal,   // the block scale may be an e4m3 subnormal (or 0: the block flushes)
  m_min_normal,  // the ideal block scale is clamped up to e4m3's 2^-6 first (torchao E4M3_EPS)
};

enum class scale_arith : std::uint8_t {
  m_double,  // s_b = e4m3(amax / (6 s_t)), the quotient exact in double, one rounding
  m_fp32,    // s_b = e4m3(f32(f32(f32(amax) / 6) / s_t)) (torchao)
};

// The NVFP4 axes (the MX rule stays scheme_config::rule). Value-initialised: the definitions.
struct quant_conventions {
  scale_division division = scale_division::m_exact;
  scale_floor floor = scale_floor::m_subnormal;
  scale_arith arith = scale_arith::m_double;
  friend bool operator==(const quant_conventions&, const quant_conventions&) = default;
};

[[nodiscard]] std::string_view name(scale_division d);
[[nodiscard]] std::string_view name(scale_floor f);
[[nodiscard]] std::string_view name(scale_arith a);
// Throw numprobe::error (exit 2) naming `place` and the known values on an unknown name.
[[nodiscard]] scale_division parse_scale_division(std::string_view text,
                                                  const std::string& place = "--scale-division");
[[nodiscard]] scale_floor parse_scale_floor(std::string_view text,
                                            const std::string& place = "--scale-floor");
[[nodiscard]] scale_arith parse_scale_arith(std::string_view text,
                                            const std::string& place = "--scale-arith");

struct scheme_config;

// The axes that apply to a config's scheme, as (axis name, value name) in a fixed order:
// scale_division, scale_floor, scale_arith for NVFP4, rule for MX, none otherwise. The axis
// names are the JSON keys of a report's `conventions` object and the scenario keys.
[[nodiscard]] std::vector<std::pair<std::string_view, std::string_view>> convention_values(
    const scheme_config& c);
// One line for reports, e.g. "scale_division=exact scale_floor=subnormal scale_arith=double";
// "none" for a scheme without axes.
[[nodiscard]] std::string conventions_text(const scheme_config& c);

// Every valid combination of the axes that apply to `base`'s scheme, `base` with each applied
// (the first is `base`'s own), for `quant --identify`. A scheme without axes gives {base}.
[[nodiscard]] std::vector<scheme_config> convention_variants(const scheme_config& base);

// Implementations whose rules are public, each setting the axes (docs/quant-conventions.md
// cites the file and function each comes from). A preset sets every axis of both NVFP4 and MX;
// the ones that do not apply to a scheme are ignored.
struct convention_preset {
  std::string_view name;
  std::string_view source;  // repository and path the values were read from
  quant_conventions nvfp4;
  std::uint8_t mx_rule;  // formats::mx_rule as its underlying value (scheme.hpp)
};
[[nodiscard]] const std::vector<convention_preset>& all_convention_presets();
// Applies the preset's axes to `c`; throws numprobe::error (exit 2) naming `place` on an
// unknown name.
void apply_convention_preset(std::string_view name, scheme_config& c,
                             const std::string& place = "--preset");

}  // namespace numprobe::formats
