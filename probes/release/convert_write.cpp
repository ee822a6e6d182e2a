// The target layouts of `convert --write`: convert_write.hpp.
#include "probes/release/convert_write.hpp"

#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"

namespace numprobe::probes {
namespace {

namespace nf = numprobe::formats;
using nf::format_id;
using nf::scheme_kind;

std::string prefix_of(const std::string& base) {
  const std::string suffix = ".weight";
  if (base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)
    return base.substr(0, base.size() - suffix.size());
  return base;
}

std::vector<std::uint64_t> last_dim(std::vector<std::uint64_t> s, std::uint64_t v) {
  s.back() = v;
  return s;
}

std::uint64_t rows_of(const std::vector<std::uint64_t>& s) {
  std::uint64_t r = 1;
  for (std::size_t i = 0; i + 1 < s.size(); ++i) r *= s[i];
  return r;
}

void need_multiple(const std::string& base, std::uint64_t in, std::uint64_t k, const std::string& layout) {
  if (in % k != 0)
    throw_input_error(base, fmt::format("{} input channels: the {} layout needs a multiple of {}", in, layout, k));
}

}  // namespace

std::string choose_write_layout(const std::string& requested, const nf::scheme_config& c,
                                const std::string& scheme_name) {
  if (requested == "bf16") return requested;
  std::string own;
  if (c.kind == scheme_kind::m_nvfp4 && c.element == format_id::m_e2m1 && c.scale_format == format_id::m_e4m3fn)
    own = "modelopt-nvfp4";
  else if (c.kind == scheme_kind::m_mx && c.element == format_id::m_e2m1 && c.scale_format == format_id::m_e8m0)
    own = "ct-mxfp4";
  else if (c.kind == scheme_kind::m_block2d && c.element == format_id::m_e4m3fn && c.scale_format == format_id::m_f32 &&
           c.block_rows == 128 && c.block_cols == 128)
    own = "deepseek-fp8";
  else if (c.kind == scheme_kind::m_channel && c.element == format_id::m_e4m3fn && c.scale_format == format_id::m_f32)
    own = "ct-fp8";
  if (requested.empty() || requested == own) {
    if (own.empty())
      throw_input_error("--write-layout",
                        fmt::format("no public layout stores {} with {} elements; --write-layout bf16 writes the "
                                    "converted values dequantized",
                                    scheme_name, nf::name(c.element)));
    return own;
  }
  throw_input_error("--write-layout", fmt::format("'{}' does not hold {} with {} elements (layouts: modelopt-nvfp4, "
                                                  "ct-mxfp4, deepseek-fp8, ct-fp8, bf16)",
                                                  requested, scheme_name, nf::name(c.element)));
}

std::vector<out_tensor> layout_tensors(const std::string& layout, const std::string& base,
                                       const std::vector<std::uint64_t>& shape, const nf::scheme_config& c) {
  if (shape.empty()) throw_input_error(base, "a scalar is not a weight to convert");
  const std::string p = prefix_of(base);
  const std::uint64_t in = shape.back(), rows = rows_of(shape);
  using io::dtype;
  if (layout == "bf16") return {{base, dtype::m_bf16, shape, out_part::m_bf16}};
  if (layout == "modelopt-nvfp4") {
    need_multiple(base, in, 16, layout);
    return {{p + ".weight", dtype::m_u8, last_dim(shape, in / 2), out_part::m_codes},
            {p + ".weight_scale", dtype::m_e4m3fn, last_dim(shape, in / 16), out_part::m_scale_codes},
            {p + ".weight_scale_2", dtype::m_f32, {}, out_part::m_tensor_scale}};
  }
  if (layout == "ct-mxfp4") {
    need_multiple(base, in, 32, layout);
    return {{p + ".weight_packed", dtype::m_u8, last_dim(shape, in / 2), out_part::m_codes},
            {p + ".weight_scale", dtype::m_u8, last_dim(shape, in / 32), out_part::m_scale_codes}};
  }
  const auto e = c.element == format_id::m_e4m3fnuz ? dtype::m_e4m3fnuz : dtype::m_e4m3fn;
  if (layout == "deepseek-fp8")
    return {{p + ".weight", e, {rows, in}, out_part::m_codes},
            {p + ".weight_scale_inv", dtype::m_f32, {(rows + 127) / 128, (in + 127) / 128}, out_part::m_scale_values}};
  if (layout == "ct-fp8")
    return {{p + ".weight", e, {rows, in}, out_part::m_codes},
            {p + ".weight_scale", dtype::m_f32, {rows, 1}, out_part::m_scale_values}};
  throw_input_error("--write-layout", "unknown layout '" + layout + "'");
}

nlohmann::json layout_quantization_config(const std::string& layout, const nf::scheme_config& c) {
  (void)c;
  const auto group = [](int bits, const char* type, const char* strategy, int group_size) {
    nlohmann::json w{{"num_bits", bits}, {"type", type}, {"strategy", strategy}, {"symmetric", true}};
    if (group_size > 0) w["group_size"] = group_size;
    return nlohmann::json{{"group_0", {{"targets", {"Linear"}}, {"weights", w}}}};
  };
  if (layout == "modelopt-nvfp4")
    return {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16}, {"producer", "numprobe convert"}};
  if (layout == "ct-mxfp4")
    return {{"quant_method", "compressed-tensors"}, {"format", "mxfp4-pack-quantized"},
            {"config_groups", group(4, "float", "group", 32)}};
  if (layout == "ct-fp8")
    return {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
            {"config_groups", group(8, "float", "channel", 0)}};
  if (layout == "deepseek-fp8")
    return {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
            {"weight_block_size", {128, 128}}};
  return nullptr;
}

}  // namespace numprobe::probes
