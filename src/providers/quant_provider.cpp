// The built-in GPU quantize kernels behind quant_provider, and the bit-for-bit comparison with
// the reference codec.
#include "src/providers/quant_provider.hpp"

#include <fmt/format.h>

#include <cstring>

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/knobs.hpp"

namespace numprobe {
namespace {

using formats::format_id;
using formats::scheme_kind;

#if NUMPROBE_HAVE_CUDA || NUMPROBE_HAVE_HIP
// scheme_config -> the kernels' request; the reason when they do not cover it.
std::string to_request(const formats::scheme_config& c, gpu::quant_request& r) {
  if (c.round != formats::rounding::m_nearest_even)
    return "the GPU quantize kernels round to nearest even only (--round)";
  if (c.over != formats::overflow::m_saturate)
    return "the GPU quantize kernels saturate (--overflow saturate)";
  switch (c.scale_format) {
    case format_id::m_f32: r.scale = gpu::quant_scale::m_f32; break;
    case format_id::m_f16: r.scale = gpu::quant_scale::m_f16; break;
    case format_id::m_e4m3fn: r.scale = gpu::quant_scale::m_e4m3; break;
    case format_id::m_e8m0: r.scale = gpu::quant_scale::m_e8m0; break;
    default: return fmt::format("no GPU kernel stores {} scales", formats::name(c.scale_format));
  }
  switch (c.element) {
    case format_id::m_e4m3fn: r.elem = gpu::quant_elem::m_e4m3; break;
    case format_id::m_e2m1: r.elem = gpu::quant_elem::m_e2m1; break;
    case format_id::m_i4: r.elem = gpu::quant_elem::m_i4; break;
    case format_id::m_u4: r.elem = gpu::quant_elem::m_u4; break;
    default: return fmt::format("no GPU kernel codes {} elements", formats::name(c.element));
  }
  const bool along_rows = c.axis == 1;
  r.amax_floor = c.amax_floor;
  r.mx_rule = static_cast<int>(c.rule);
  r.nv_division = static_cast<int>(c.conv.division);
  r.nv_min_normal_floor = c.conv.floor == formats::scale_floor::m_min_normal;
  r.nv_fp32_arith = c.conv.arith == formats::scale_arith::m_fp32;
  switch (c.kind) {
    case scheme_kind::m_tensor: r.kind = gpu::quant_kind::m_tensor; break;
    case scheme_kind::m_block2d:
      r.kind = gpu::quant_kind::m_block2d;
      r.block_rows = c.block_rows;
      r.block_cols = c.block_cols;
      if (c.block_cols != 128 || c.block_rows > 128)
        return "the GPU kernels take R x 128 blocks (R <= 128)";
      break;
    case scheme_kind::m_group:
      r.kind = gpu::quant_kind::m_row_block;
      r.block_cols = c.group;
      break;
    case scheme_kind::m_mx: r.kind = gpu::quant_kind::m_mx; r.block_cols = 32; break;
    case scheme_kind::m_nvfp4: r.kind = gpu::quant_kind::m_nvfp4; r.block_cols = 16; break;
    case scheme_kind::m_asym: r.kind = gpu::quant_kind::m_asym; r.block_cols = c.group; break;
    default:
      return fmt::format("no GPU kernel for the {} scheme", formats::name(c.kind));
  }
  if (!along_rows && c.kind != scheme_kind::m_tensor && c.kind != scheme_kind::m_block2d)
    return "the GPU kernels run blocks along rows (--axis 1)";
  if (r.kind != gpu::quant_kind::m_tensor && r.kind != gpu::quant_kind::m_block2d &&
      r.block_cols != 16 && r.block_cols != 32 && r.block_cols != 64 && r.block_cols != 128)
    return "the GPU kernels take groups of 16, 32, 64 or 128";
  if (r.kind == gpu::quant_kind::m_mx && c.element == format_id::m_i4)
    return "no GPU kernel for MX int elements";
  return {};
}

class gpu_quant_provider final : public quant_provider {
 public:
  gpu_quant_provider(const gpu::quant_api& api, int device) : m_api(api), m_device(device) {}
  [[nodiscard]] std::string name() const override { return m_api.vendor; }
  [[nodiscard]] std::string unsupported(const formats::scheme_config& c) const override {
    gpu::quant_request r;
    return to_request(c, r);
  }
  [[nodiscard]] quant_device_output quantize(const formats::scheme_config& c,
                                             std::span<const float> x, std::int64_t rows,
                                             std::int64_t cols) override {
    gpu::quant_request r;
    const std::string why = to_request(c, r);
    if (!why.empty()) throw_input_error("--backend " + std::string(m_api.vendor), why);
    if (static_cast<std::int64_t>(x.size()) != rows * cols)
      throw_input_error("shape", "tensor size does not match rows x cols");
    r.rows = rows;
    r.cols = cols;
    r.x = x.data();
    r.device = m_device;
    gpu::quant_device_result d = m_api.quantize(r);
    quant_device_output out;
    out.codes = std::move(d.codes);
    out.scale_codes = std::move(d.scale_codes);
    out.zero_points = std::move(d.zero_points);
    out.tensor_scale = d.tensor_scale;
    out.kernel_ms = d.kernel_ms;
    out.amax_ms = d.amax_ms;
    out.conversion = d.conversion;
    m_last_conversion = out.conversion;
    return out;
  }
  [[nodiscard]] nlohmann::json metadata() const override {
    return {{"backend", m_api.vendor}, {"device", m_device}, {"conversion", m_last_conversion},
            {"exactness", "scales computed in double as the reference does; elements from a "
                          "round-to-odd fp32 quotient (exact after one more rounding); NVFP4 "
                          "elements by exact decision points"}};
  }

 private:
  const gpu::quant_api& m_api;
  int m_device;
  std::string m_last_conversion;
};
#endif

std::uint32_t float_bits(double v) {
  const float f = static_cast<float>(v);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::unique_ptr<quant_provider> make_cuda_quant(const std::string&, int device, const quant_exec_options&) {
#if NUMPROBE_HAVE_CUDA
  if (gpu::cuda_api().device_count() == 0)
    throw_backend_error("--backend cuda", "no CUDA device (" + gpu::cuda_api().no_device_reason() + ")");
  return std::make_unique<gpu_quant_provider>(gpu::cuda_quant_api(), device);
#else
  (void)device;
  throw_backend_error("--backend cuda", "the cuda backend is not compiled into this build");
#endif
}

std::unique_ptr<quant_provider> make_hip_quant(const std::string&, int device, const quant_exec_options&) {
#if NUMPROBE_HAVE_HIP
  if (gpu::hip_api().device_count() == 0)
    throw_backend_error("--backend hip", "no HIP device (" + gpu::hip_api().no_device_reason() + ")");
  return std::make_unique<gpu_quant_provider>(gpu::hip_quant_api(), device);
#else
  (void)device;
  throw_backend_error("--backend hip", "the hip backend is not compiled into this build");
#endif
}

std::unique_ptr<quant_provider> make_exec_quant(const std::string& backend, int, const quant_exec_options& o) {
  return make_exec_quant_provider(backend, o);
}

// cuda and hip stay registered in builds without them, so that asking for one is a backend
// error (exit 3: not compiled in), not an unknown name.
const provider_registry<quant_provider_factory>& quant_registry() {
  static const provider_registry<quant_provider_factory> r = [] {
    provider_registry<quant_provider_factory> t;
    t.add("exec", &make_exec_quant, "an external quantizer judged bit for bit (exec:CMD)");
    t.add("cuda", &make_cuda_quant, "built-in GPU quantize kernels on an NVIDIA GPU");
    t.add("hip", &make_hip_quant, "built-in GPU quantize kernels on an AMD GPU");
    return t;
  }();
  return r;
}

}  // namespace

std::unique_ptr<quant_provider> make_quant_provider(const std::string& backend, int device,
                                                    const quant_exec_options& exec) {
  const backend_spec spec = parse_backend_spec(backend);
  // exec takes a command after its ':'; the device backends take none.
  const quant_provider_factory* make = quant_registry().find(spec.kind);
  if (make == nullptr || spec.has_arg != (spec.kind == "exec"))
    throw_input_error("--backend", "quantize runs on ref, cuda, hip or exec:CMD, not '" + backend + "'");
  return (*make)(backend, device, exec);
}

std::vector<backend_info> quant_backends() { return quant_registry().list(); }

quant_bit_check compare_quant(const formats::quant_result& ref, const quant_device_output& dev,
                              std::span<const double> input, std::size_t max_listed) {
  quant_bit_check c;
  c.elements = static_cast<std::int64_t>(ref.codes.size());
  c.blocks = static_cast<std::int64_t>(ref.blocks.size());
  std::vector<quant_mismatch> scales;
  for (std::size_t i = 0; i < ref.codes.size(); ++i) {
    const std::uint32_t d = i < dev.codes.size() ? dev.codes[i] : 0xFFFFFFFFu;
    if (d == ref.codes[i]) continue;
    ++c.element_mismatches;
    if (c.listed.size() < max_listed)
      c.listed.push_back({"element", static_cast<std::int64_t>(i), input[i], d, ref.codes[i]});
  }
  const bool one_scale = ref.config.kind == scheme_kind::m_tensor;
  for (std::size_t b = 0; b < ref.blocks.size(); ++b) {
    const auto& blk = ref.blocks[b];
    const std::size_t di = one_scale ? 0 : b;
    const std::uint32_t d = di < dev.scale_codes.size() ? dev.scale_codes[di] : 0xFFFFFFFFu;
    if (d != blk.scale_code) {
      ++c.scale_mismatches;
      if (scales.size() < max_listed)
        scales.push_back({"scale", static_cast<std::int64_t>(b), blk.amax, d, blk.scale_code});
    }
    if (ref.config.kind == scheme_kind::m_asym) {
      const std::uint32_t z = b < dev.zero_points.size() ? dev.zero_points[b] : 0xFFFFFFFFu;
      if (z != static_cast<std::uint32_t>(blk.zero_point)) {
        ++c.zero_point_mismatches;
        if (scales.size() < max_listed)
          scales.push_back({"zero_point", static_cast<std::int64_t>(b), blk.amax, z,
                            static_cast<std::uint32_t>(blk.zero_point)});
      }
    }
  }
  if (ref.config.kind == scheme_kind::m_nvfp4) {
    c.tensor_scale_match = float_bits(dev.tensor_scale) == float_bits(ref.tensor_scale);
    if (!c.tensor_scale_match)
      scales.push_back({"tensor_scale", 0, 0.0, float_bits(dev.tensor_scale), float_bits(ref.tensor_scale)});
  }
  for (auto& s : scales)
    if (c.listed.size() < max_listed) c.listed.push_back(std::move(s));
  return c;
}

nlohmann::json to_json(const quant_bit_check& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& m : c.listed)
    rows.push_back({{"what", m.what}, {"index", m.index}, {"input", m.input},
                    {"device_code", m.device_code}, {"reference_code", m.reference_code}});
  return {{"exact", c.exact()},
          {"elements", c.elements},
          {"blocks", c.blocks},
          {"element_mismatches", c.element_mismatches},
          {"scale_mismatches", c.scale_mismatches},
          {"zero_point_mismatches", c.zero_point_mismatches},
          {"tensor_scale_match", c.tensor_scale_match},
          {"mismatches", rows}};
}

}  // namespace numprobe
