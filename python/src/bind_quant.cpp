// numprobe.quantize: formats::quantize through the quant probe's analyze_quant, so codes,
// scales and statistics are the CLI's (`numprobe quant --input X.npy --dump DIR`) bit for bit.
#include <nanobind/stl/string.h>
#include <nanobind/stl/optional.h>

#include <optional>
#include <string>

#include "numprobe/formats/conventions.hpp"
#include "probes/quant/quant_probe.hpp"
#include "python/src/arrays.hpp"

namespace numprobe::python {
namespace {

struct quant_args {
  std::string scheme, preset, scale_division, scale_floor, scale_arith, rule, format, scale_format;
  std::optional<int> axis;
  std::optional<std::int64_t> group;
  std::string rounding = "rne", overflow = "saturate";
  std::uint64_t seed = 7;
};

// The config `numprobe quant` builds from the same flags (src/cli/cmd_quant.cpp): the scheme's
// defaults, format overrides, the preset, then each convention axis given.
formats::scheme_config make_config(const quant_args& a) {
  formats::scheme_config c = formats::find_scheme(a.scheme, "scheme").defaults;
  if (!a.format.empty()) c.element = formats::parse_format(a.format, "format");
  if (!a.scale_format.empty()) c.scale_format = formats::parse_format(a.scale_format, "scale_format");
  if (a.axis) {
    if (*a.axis != 0 && *a.axis != 1) throw_input_error("axis", "expected 0 (rows) or 1 (cols)");
    c.axis = *a.axis;
  }
  if (a.group) {
    if (*a.group <= 0) throw_input_error("group", "must be a positive group size");
    c.group = *a.group;
  }
  if (!a.preset.empty()) formats::apply_convention_preset(a.preset, c, "preset");
  if (!a.scale_division.empty()) c.conv.division = formats::parse_scale_division(a.scale_division, "scale_division");
  if (!a.scale_floor.empty()) c.conv.floor = formats::parse_scale_floor(a.scale_floor, "scale_floor");
  if (!a.scale_arith.empty()) c.conv.arith = formats::parse_scale_arith(a.scale_arith, "scale_arith");
  if (!a.rule.empty()) c.rule = formats::parse_mx_rule(a.rule, "rule");
  if (a.rounding == "rne") c.round = formats::rounding::m_nearest_even;
  else if (a.rounding == "rtz") c.round = formats::rounding::m_toward_zero;
  else if (a.rounding == "stochastic") c.round = formats::rounding::m_stochastic;
  else throw_input_error("rounding", "expected rne, rtz or stochastic, got '" + a.rounding + "'");
  if (a.overflow == "saturate") c.over = formats::overflow::m_saturate;
  else if (a.overflow == "nan") c.over = formats::overflow::m_nan;
  else if (a.overflow == "inf") c.over = formats::overflow::m_inf;
  else throw_input_error("overflow", "expected saturate, nan or inf, got '" + a.overflow + "'");
  c.seed = a.seed;
  formats::validate(c, 1, 1);
  return c;
}

nb::dict quantize(const in_array& x, std::int64_t rows, std::int64_t cols, const quant_args& a) {
  if (rows <= 0 || cols <= 0 || x.size() != u(rows * cols)) throw_input_error("x", "expected a non-empty [rows, cols] array");
  probes::quant_probe_options o;
  o.scheme_name = formats::find_scheme(a.scheme, "scheme").name;
  o.config = make_config(a);
  o.seed = a.seed;
  probes::quant_report r;
  {
    nb::gil_scoped_release unlocked;
    r = probes::analyze_quant(o, copy(x), rows, cols);
  }
  const auto& q = r.result;
  const double st = q.config.kind == formats::scheme_kind::m_nvfp4 ? q.tensor_scale : 1.0;
  std::vector<double> scales, multipliers;
  std::vector<std::uint32_t> scale_codes;
  std::vector<std::int32_t> zero_points;
  for (const auto& b : q.blocks) {
    multipliers.push_back(b.scale);
    scales.push_back(b.scale / st);  // the stored block scale (NVFP4 folds s_t into b.scale)
    scale_codes.push_back(b.scale_code);
    zero_points.push_back(b.zero_point);
  }
  const std::vector<std::size_t> shape = {u(rows), u(cols)}, grid = {u(q.grid.grid_rows), u(q.grid.grid_cols)};
  nb::dict d;
  d["codes"] = to_numpy(std::vector<std::uint32_t>(q.codes), shape);
  d["dequant"] = to_numpy(std::vector<double>(q.dequant), shape);
  d["scales"] = to_numpy(std::move(scales), grid);
  d["scale_codes"] = to_numpy(std::move(scale_codes), grid);
  d["multipliers"] = to_numpy(std::move(multipliers), grid);
  d["zero_points"] = to_numpy(std::move(zero_points), grid);
  d["tensor_scale"] = q.tensor_scale;
  d["element_bits"] = formats::info(q.config.element).storage_bits;
  d["report_json"] = probes::to_json(r).dump();
  return d;
}

}  // namespace

void bind_quant(nb::module_& m) {
  nb::class_<quant_args>(m, "QuantArgs")
      .def(nb::init<>())
      .def_rw("scheme", &quant_args::scheme)
      .def_rw("preset", &quant_args::preset)
      .def_rw("scale_division", &quant_args::scale_division)
      .def_rw("scale_floor", &quant_args::scale_floor)
      .def_rw("scale_arith", &quant_args::scale_arith)
      .def_rw("rule", &quant_args::rule)
      .def_rw("format", &quant_args::format)
      .def_rw("scale_format", &quant_args::scale_format)
      .def_rw("axis", &quant_args::axis)
      .def_rw("group", &quant_args::group)
      .def_rw("rounding", &quant_args::rounding)
      .def_rw("overflow", &quant_args::overflow)
      .def_rw("seed", &quant_args::seed);
  m.def("quantize", &quantize, nb::arg("x"), nb::arg("rows"), nb::arg("cols"), nb::arg("args"));
}

}  // namespace numprobe::python
