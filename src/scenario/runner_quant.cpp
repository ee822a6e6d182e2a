// Check runner for `probe = "quant"`: quantize one tensor with a format and a block-scaling
// scheme. It runs the reference codec (quant has no kernel backends yet), so --backend does not
// apply to it.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "probes/quant/quant_probe.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

probes::quant_probe_options make_options(const check_spec& s) {
  probes::quant_probe_options o;
  const auto& sch = formats::find_scheme(s.get_string("scheme", "nvfp4"), s.place("scheme"));
  o.scheme_name = std::string(sch.name);
  o.config = sch.defaults;
  if (s.has("format")) o.config.element = formats::parse_format(s.get_string("format", ""), s.place("format"));
  if (s.has("scale_format"))
    o.config.scale_format = formats::parse_format(s.get_string("scale_format", ""), s.place("scale_format"));
  if (s.has("axis")) o.config.axis = static_cast<int>(s.get_int("axis", 1));
  if (s.has("group")) o.config.group = s.get_int("group", 128);
  // Conventions (docs/quant-conventions.md): the preset first, then each axis given.
  if (s.has("preset")) formats::apply_convention_preset(s.get_string("preset", ""), o.config, s.place("preset"));
  if (s.has("scale_division"))
    o.config.conv.division = formats::parse_scale_division(s.get_string("scale_division", ""), s.place("scale_division"));
  if (s.has("scale_floor"))
    o.config.conv.floor = formats::parse_scale_floor(s.get_string("scale_floor", ""), s.place("scale_floor"));
  if (s.has("scale_arith"))
    o.config.conv.arith = formats::parse_scale_arith(s.get_string("scale_arith", ""), s.place("scale_arith"));
  if (s.has("rule")) o.config.rule = formats::parse_mx_rule(s.get_string("rule", ""), s.place("rule"));
  const auto rnd = s.get_string("rounding", "rne");
  if (rnd == "rne") o.config.round = formats::rounding::m_nearest_even;
  else if (rnd == "rtz") o.config.round = formats::rounding::m_toward_zero;
  else if (rnd == "stochastic") o.config.round = formats::rounding::m_stochastic;
  else throw_input_error(s.place("rounding"), fmt::format("expected rne, rtz or stochastic, got '{}'", rnd));
  const auto ov = s.get_string("overflow", "saturate");
  if (ov == "saturate") o.config.over = formats::overflow::m_saturate;
  else if (ov == "nan") o.config.over = formats::overflow::m_nan;
  else if (ov == "inf") o.config.over = formats::overflow::m_inf;
  else throw_input_error(s.place("overflow"), fmt::format("expected saturate, nan or inf, got '{}'", ov));
  o.seed = static_cast<std::uint64_t>(s.get_int("seed", 7));
  o.config.seed = o.seed;
  o.input = s.get_string("input", "");
  o.dist = probes::parse_quant_dist(s.get_string("dist", "llm"), s.place("dist"));
  if (s.has("shape")) {
    const auto sh = probes::parse_shape(s.get_string("shape", ""), s.place("shape"));
    o.rows = sh.rows;
    o.cols = sh.cols;
  } else if (o.input.empty()) {
    o.rows = 256;
    o.cols = 1024;
  }
  o.bounds = s.bounds;
  o.worst_count = static_cast<std::size_t>(std::max<std::int64_t>(0, s.get_int("worst", 5)));
  // The dequant GEMM through an MMA model (quant --gemm; probes/quant/quant_gemm.hpp).
  if (s.has("gemm")) {
    o.gemm.tokens = s.get_int("gemm", 0);
    if (o.gemm.tokens < 1 || o.gemm.tokens > 4096)
      throw_input_error(s.place("gemm"), fmt::format("TOKENS must be 1..4096, got {}", o.gemm.tokens));
  }
  o.gemm.acc_model = s.get_string("acc_model", "");
  o.gemm.promote = s.get_int("acc_promote", 0);
  o.gemm.acc_fma = s.get_bool("acc_fma", false);
  formats::validate(o.config, 1, 1);
  return o;
}

void run_quant_check(const check_spec& s, const run_context&, result::check_result& out) {
  const auto o = make_options(s);
  const auto r = probes::run_quant(o);
  probes::fill_result(r, s.bounds, s.get_bool("allow_nonfinite", false), out);
}

}  // namespace

check_runner quant_runner() {
  using K = param_kind;
  check_runner r;
  r.probe = "quant";
  r.description = "quantize one tensor: error, flushes, clipping, outlier blocks (reference codec)";
  r.params = {{"format", K::m_string, "element format (default: the scheme's)"},
              {"scheme", K::m_string, "block-scaling scheme"},
              {"input", K::m_string, "PATH[:TENSOR] (.npy, .safetensors); default synthetic"},
              {"shape", K::m_string, "MxN (default 256x1024)"},
              {"dist", K::m_string, "normal | laplace | llm | outliers"},
              {"axis", K::m_int, "axis blocks run along"},
              {"group", K::m_int, "group size"},
              {"scale_format", K::m_string, "f32 | f16 | bf16 | e4m3fn | e8m0"},
              {"rule", K::m_string, "MX scale rule floor | ceil | rceil"},
              {"rounding", K::m_string, "rne | rtz | stochastic"},
              {"overflow", K::m_string, "saturate | nan | inf"},
              {"seed", K::m_int, "input seed"},
              {"allow_nonfinite", K::m_bool, "pass even when the input holds NaN/Inf"},
              {"worst", K::m_int, "worst blocks to list"},
              {"gemm", K::m_int, "TOKENS: the tensor as W of a dequant GEMM through acc_model"},
              {"acc_model", K::m_string, "gemm: the MMA model (numprobe mma --list-models)"},
              {"acc_promote", K::m_int, "gemm: promote to fp32 every N instructions"},
              {"acc_fma", K::m_bool, "gemm: the promotion as one fused multiply-add (Triton's default)"}};
  r.known_metric = [](const std::string& m) {
    const auto& a = probes::quant_metric_names();
    const auto& g = probes::quant_gemm_metric_names();
    return std::find(a.begin(), a.end(), m) != a.end() || std::find(g.begin(), g.end(), m) != g.end();
  };
  for (const auto& n : probes::quant_metric_names()) r.metric_names += (r.metric_names.empty() ? "" : ", ") + n;
  for (const auto& n : probes::quant_gemm_metric_names()) r.metric_names += ", " + n + " (with gemm)";
  r.run = run_quant_check;
  return r;
}

}  // namespace numprobe::scenario
