// The quantization-convention flags (quant_conventions.hpp).
#include "src/cli/quant_conventions.hpp"

#include "numprobe/base/error.hpp"

namespace numprobe::cli {

void add_convention_flags(CLI::App* sub, convention_flags& f) {
  sub->add_option("--preset", f.preset,
                  "conventions of a known implementation: ocp | modelopt | torchao | "
                  "compressed-tensors | trtllm | flashinfer | cublas (docs/quant-conventions.md)");
  sub->add_option("--scale-division", f.division,
                  "NVFP4 element scaling: exact | reciprocal | reciprocal-approx (default exact)");
  sub->add_option("--scale-floor", f.floor,
                  "NVFP4 block-scale floor: subnormal | min-normal (default subnormal)");
  sub->add_option("--scale-arith", f.arith,
                  "NVFP4 block-scale arithmetic: double | fp32 (default double)");
  sub->add_option("--rule", f.rule, "MX scale rule: floor | ceil | rceil | even | nearest");
}

void apply_convention_flags(const convention_flags& f, formats::scheme_config& c) {
  if (!f.preset.empty()) formats::apply_convention_preset(f.preset, c, "--preset");
  if (!f.division.empty()) c.conv.division = formats::parse_scale_division(f.division, "--scale-division");
  if (!f.floor.empty()) c.conv.floor = formats::parse_scale_floor(f.floor, "--scale-floor");
  if (!f.arith.empty()) c.conv.arith = formats::parse_scale_arith(f.arith, "--scale-arith");
  if (!f.rule.empty()) {
    const auto rule = formats::parse_mx_rule(f.rule, "--rule");
    // Refused by name, never ignored (as the NVFP4 axes on other schemes, formats::validate):
    // only the MX schemes derive a shared exponent by a rule.
    if (c.kind != formats::scheme_kind::m_mx)
      throw_input_error("--rule", "'" + f.rule + "' is an MX scale rule; it applies to the MX schemes only (mx, "
                                  "mxfp4, mxfp6, mxfp8, mxint8), not to a scheme of kind '" +
                                  std::string(formats::name(c.kind)) + "'");
    c.rule = rule;
  }
}

}  // namespace numprobe::cli
