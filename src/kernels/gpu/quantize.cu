// Host side of the quantize kernels: validation, buffers (outputs poisoned), timing, and the
// bandwidth measurement against a device-to-device copy, around the launch of
// quantize_launch.cuh. Exports cuda_quant_api() / hip_quant_api(), and quantize_with /
// bandwidth_with for the bench's launch variants.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/gpu_host_util.cuh"
#include "src/kernels/gpu/quantize_launch.cuh"
#include "src/kernels/gpu/quantize_tensor_kernels.cuh"

namespace numprobe::gpu {
namespace {

using quant::params;

bool nibble(quant_elem e) { return e != quant_elem::m_e4m3; }

int scale_bytes(quant_scale s) {
  switch (s) {
    case quant_scale::m_f32: return 4;
    case quant_scale::m_f16: return 2;
    default: return 1;
  }
}

codec::scale_fmt to_codec(quant_scale s) {
  switch (s) {
    case quant_scale::m_f16: return codec::scale_fmt::m_f16;
    case quant_scale::m_e4m3: return codec::scale_fmt::m_e4m3;
    case quant_scale::m_e8m0: return codec::scale_fmt::m_e8m0;
    default: return codec::scale_fmt::m_f32;
  }
}

// Checks the request against what the kernels cover; fills the launch parameters (pointers
// left null).
params plan(const quant_request& r) {
  if (r.rows < 1 || r.cols < 1) throw_input_error("shape", "the GPU quantize kernels need rows, cols >= 1");
  params p;
  p.rows = r.rows;
  p.cols = r.cols;
  p.kind = r.kind;
  p.elem = r.elem;
  p.sfmt = to_codec(r.scale);
  p.scale_bytes = scale_bytes(r.scale);
  p.amax_floor = r.amax_floor;
  // formats::mx_rule 0..4: floor, ceil, rceil, even, nearest.
  if (r.kind == quant_kind::m_mx && (r.mx_rule < 0 || r.mx_rule > 4))
    throw_input_error("--rule", "unknown MX rule " + std::to_string(r.mx_rule));
  p.mx_rule = r.mx_rule;
  p.mx_mbits = r.elem == quant_elem::m_e4m3 ? 3 : 1;
  if (r.nv_division < 0 || r.nv_division > 2)
    throw_input_error("--scale-division", "unknown value " + std::to_string(r.nv_division));
  if (r.kind == quant_kind::m_nvfp4) {
    p.nv.division = r.nv_division;
    p.nv.min_normal_floor = r.nv_min_normal_floor;
    p.nv.fp32_arith = r.nv_fp32_arith;
  }
  p.hw = r.hw_cvt;
  p.row_bytes = nibble(r.elem) ? (r.cols + 1) / 2 : r.cols;
  p.elem_max = r.elem == quant_elem::m_e4m3 ? 448.0 : r.elem == quant_elem::m_e2m1 ? 6.0 : 7.0;
  p.emax_elem = r.elem == quant_elem::m_e4m3 ? 8 : 2;
  p.block_cols = r.block_cols;
  p.block_rows = r.block_rows;
  const auto bad = [](const std::string& what) {
    throw_input_error("--backend", "no GPU quantize kernel for " + what +
                                       " (kernels: fp8 e4m3 per-tensor, 1x128 and 128x128 "
                                       "blocks; MX e2m1/e4m3 blocks of 32; NVFP4; int4 groups "
                                       "and AWQ; groups of 16, 32, 64 or 128 along rows)");
  };
  switch (r.kind) {
    case quant_kind::m_tensor:
      if (r.elem != quant_elem::m_e4m3) bad("a per-tensor scale with a non-fp8 element");
      if (r.scale == quant_scale::m_e4m3) bad("an e4m3 tensor scale");
      p.block_cols = 128;
      p.block_rows = 1;
      break;
    case quant_kind::m_block2d:
      if (r.elem != quant_elem::m_e4m3) bad("2D blocks of a non-fp8 element");
      if (r.block_cols != 128 || r.block_rows < 1 || r.block_rows > 128)
        bad("2D blocks other than R x 128 (R <= 128)");
      if (r.block_rows == 1) p.kind = quant_kind::m_row_block;
      break;
    case quant_kind::m_row_block:
      if (r.elem == quant_elem::m_u4 || r.elem == quant_elem::m_e2m1) bad("this element format with a symmetric group scale");
      break;
    case quant_kind::m_mx:
      if (r.elem != quant_elem::m_e2m1 && r.elem != quant_elem::m_e4m3) bad("MX with this element");
      if (r.scale != quant_scale::m_e8m0) bad("MX without e8m0 scales");
      break;
    case quant_kind::m_nvfp4:
      if (r.elem != quant_elem::m_e2m1 || r.scale != quant_scale::m_e4m3)
        bad("NVFP4 other than e2m1 elements with e4m3 block scales");
      break;
    case quant_kind::m_asym:
      if (r.elem != quant_elem::m_u4 || r.scale != quant_scale::m_f16) bad("asymmetric groups other than uint4 with fp16 scales");
      break;
  }
  if (p.kind != quant_kind::m_block2d && p.kind != quant_kind::m_tensor) {
    const auto b = p.block_cols;
    if (b != 16 && b != 32 && b != 64 && b != 128) bad("blocks of " + std::to_string(b));
  }
  if (r.dequant && !(r.elem == quant_elem::m_i4 || r.elem == quant_elem::m_u4) )
    throw_input_error("dequant", "the fp16 dequant kernel is for int4 codes");
  if (r.dequant && r.scale != quant_scale::m_f16)
    throw_input_error("dequant", "the 0x6400 dequant kernel takes fp16 scales");
  if (p.kind == quant_kind::m_block2d) {
    p.nb_cols = (r.cols + 127) / 128;
    p.n_blocks = p.nb_cols * ((r.rows + p.block_rows - 1) / p.block_rows);
  } else if (p.kind == quant_kind::m_tensor) {
    p.nb_cols = (r.cols + 127) / 128;
    p.n_blocks = p.nb_cols * r.rows;  // launch geometry; one scale is stored
  } else {
    p.nb_cols = (r.cols + p.block_cols - 1) / p.block_cols;
    p.n_blocks = p.nb_cols * r.rows;
  }
  return p;
}

std::int64_t stored_scales(const params& p) { return p.kind == quant_kind::m_tensor ? 1 : p.n_blocks; }

// The pre-pass for per-tensor and NVFP4 scales: amax on the device, then one thread.
void tensor_pass(params& p, unsigned* amax, float* tscale) {
  NUMPROBE_GPU_CHECK(Memset, amax, 0, sizeof(unsigned));
  const std::int64_t n = p.rows * p.cols;
  int resident = 0;
  if (NUMPROBE_GPU_API(OccupancyMaxActiveBlocksPerMultiprocessor)(&resident, quant::amax_abs_finite, 256, 0) !=
          platform::success || resident < 1)
    resident = 4;
  const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>(
      (n / 16 + 255) / 256, 1, static_cast<std::int64_t>(resident) * quant::multiprocessors() * 2));
  quant::amax_abs_finite<<<blocks, 256>>>(p.x, n, amax);
  check_launch("amax_abs_finite");
  quant::tensor_scale_kernel<<<1, 1>>>(p, amax, tscale);
  check_launch("tensor_scale_kernel");
  p.tensor_scale = tscale;
}

bool needs_tensor_pass(const params& p) {
  return p.kind == quant_kind::m_tensor || p.kind == quant_kind::m_nvfp4;
}

std::string conversion_name(const params& p) {
  if (p.elem == quant_elem::m_e4m3) {
    int dev = 0, major = 0, minor = 0;
    (void)NUMPROBE_GPU_API(GetDevice)(&dev);
    platform::device_prop_t prop{};
    if (NUMPROBE_GPU_API(GetDeviceProperties)(&prop, dev) == platform::success) {
      major = prop.major;
      minor = prop.minor;
    }
    const bool hw = platform::vendor == std::string("cuda") && p.hw && major * 10 + minor >= 89;
    return hw ? "e4m3: cvt.rn.satfinite.e4m3x2.f32 on v * (1/s) where that decides the code, else "
                "on a round-to-odd fp32 quotient"
              : "e4m3: software RNE on v * (1/s) where that decides the code, else on a "
                "round-to-odd fp32 quotient";
  }
  if (p.kind == quant_kind::m_nvfp4 && p.nv.division != 0)
    return "e2m1: thresholds on v at which f32(v * r) crosses each midpoint, r the block's fp32 "
           "reciprocal (--scale-division), ties to even";
  if (p.kind == quant_kind::m_nvfp4) return "e2m1: exact thresholds at the midpoints m_k * s_b * s_t, ties to even";
  if (p.elem == quant_elem::m_e2m1) return "e2m1: exact thresholds at the midpoints m_k * 2^X, ties to even";
  return "int4: rint of a round-to-odd fp32 quotient, clamped";
}

template <class Launch>
quant_device_result run_quantize(const quant_request& r, Launch&& launch) {
  params p = plan(r);
  if (!r.x) throw_input_error("x", "no input tensor");
  host::select_device(r.device);
  const std::int64_t n = r.rows * r.cols;
  host::buffer x(static_cast<std::size_t>(n) * 4, "x");
  host::buffer codes(static_cast<std::size_t>(r.rows * p.row_bytes), "codes");
  const std::int64_t ns = stored_scales(p);
  host::buffer scales(static_cast<std::size_t>(ns * p.scale_bytes), "scales");
  host::buffer zeros(r.kind == quant_kind::m_asym ? static_cast<std::size_t>(p.n_blocks) : 0, "zeros");
  host::buffer amax(sizeof(unsigned), "amax"), tscale(sizeof(float), "tensor_scale");
  NUMPROBE_GPU_CHECK(Memcpy, x.as<float>(), r.x, n * 4, platform::memcpy_h2d);
  codes.poison();
  scales.poison();
  zeros.poison();
  tscale.poison();
  p.x = x.as<float>();
  p.codes = codes.as<std::uint8_t>();
  p.scales = scales.as<void>();
  p.zeros = zeros.as<std::uint8_t>();

  quant_device_result out;
  host::event e0, e1, e2;
  NUMPROBE_GPU_CHECK(EventRecord, e0.get(), nullptr);
  if (needs_tensor_pass(p)) tensor_pass(p, amax.as<unsigned>(), tscale.as<float>());
  NUMPROBE_GPU_CHECK(EventRecord, e1.get(), nullptr);
  launch(p);
  NUMPROBE_GPU_CHECK(EventRecord, e2.get(), nullptr);
  out.kernel_ms = host::elapsed_ms(e1, e2);
  out.amax_ms = host::elapsed_ms(e0, e1);
  out.conversion = conversion_name(p);

  out.packed.resize(static_cast<std::size_t>(r.rows * p.row_bytes));
  NUMPROBE_GPU_CHECK(Memcpy, out.packed.data(), codes.as<void>(), out.packed.size(), platform::memcpy_d2h);
  std::vector<std::uint8_t> sc(static_cast<std::size_t>(ns * p.scale_bytes));
  NUMPROBE_GPU_CHECK(Memcpy, sc.data(), scales.as<void>(), sc.size(), platform::memcpy_d2h);
  out.scale_codes.resize(static_cast<std::size_t>(ns));
  for (std::int64_t i = 0; i < ns; ++i) {
    std::uint32_t v = 0;
    for (int b = 0; b < p.scale_bytes; ++b) v |= static_cast<std::uint32_t>(sc[i * p.scale_bytes + b]) << (8 * b);
    out.scale_codes[i] = v;
  }
  if (r.kind == quant_kind::m_asym) {
    out.zero_points.resize(static_cast<std::size_t>(p.n_blocks));
    NUMPROBE_GPU_CHECK(Memcpy, out.zero_points.data(), zeros.as<void>(), out.zero_points.size(), platform::memcpy_d2h);
  }
  if (r.kind == quant_kind::m_nvfp4)
    NUMPROBE_GPU_CHECK(Memcpy, &out.tensor_scale, tscale.as<void>(), 4, platform::memcpy_d2h);
  out.codes.resize(static_cast<std::size_t>(n));
  for (std::int64_t row = 0; row < r.rows; ++row)
    for (std::int64_t c = 0; c < r.cols; ++c) {
      const std::uint8_t b = out.packed[row * p.row_bytes + (nibble(r.elem) ? c / 2 : c)];
      out.codes[row * r.cols + c] = nibble(r.elem) ? ((c & 1) ? b >> 4 : b & 0xF) : b;
    }

  if (r.dequant) {
    host::buffer dq(static_cast<std::size_t>(n) * 2, "dequant");
    dq.poison();
    const std::int64_t nbytes = r.rows * p.row_bytes;
    const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>((nbytes + 255) / 256, 1, 65536));
    quant::dequant_int4_f16<<<blocks, 256>>>(codes.as<std::uint8_t>(), r.rows, r.cols, p.row_bytes,
                                             scales.as<std::uint16_t>(),
                                             r.kind == quant_kind::m_asym ? zeros.as<std::uint8_t>() : nullptr,
                                             p.nb_cols, p.block_cols, dq.as<std::uint16_t>());
    check_launch("dequant_int4_f16");
    out.dequant_f16.resize(static_cast<std::size_t>(n));
    NUMPROBE_GPU_CHECK(Memcpy, out.dequant_f16.data(), dq.as<void>(), n * 2, platform::memcpy_d2h);
  }
  NUMPROBE_GPU_CHECK(DeviceSynchronize);
  return out;
}

// Device-generated fp32 values: mostly N(0,1)-like, one in 997 a x64 outlier, some exact zeros.
__global__ void fill_bench(float* x, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    const float u = static_cast<float>(h >> 40) * 0x1.0p-24f - 0.5f;
    float v = u * 3.0f;
    if (h % 997 == 0) v *= 64.f;
    if (h % 101 == 0) v = 0.f;
    x[i] = v;
  }
}

template <class Launch>
quant_bandwidth run_bandwidth(const quant_request& shape, std::int64_t bytes, int iters, Launch&& launch) {
  quant_request r = shape;
  r.cols = shape.cols > 0 ? shape.cols : 4096;
  r.rows = bytes / 4 / r.cols;
  params p = plan(r);
  host::select_device(r.device);
  const std::int64_t n = r.rows * r.cols;
  host::buffer x(static_cast<std::size_t>(n) * 4, "x"), y(static_cast<std::size_t>(n) * 4, "copy");
  host::buffer codes(static_cast<std::size_t>(r.rows * p.row_bytes), "codes");
  host::buffer scales(static_cast<std::size_t>(stored_scales(p) * p.scale_bytes), "scales");
  host::buffer zeros(r.kind == quant_kind::m_asym ? static_cast<std::size_t>(p.n_blocks) : 0, "zeros");
  host::buffer amax(sizeof(unsigned), "amax"), tscale(sizeof(float), "tensor_scale");
  fill_bench<<<4096, 256>>>(x.as<float>(), n);
  check_launch("fill_bench");
  p.x = x.as<float>();
  p.codes = codes.as<std::uint8_t>();
  p.scales = scales.as<void>();
  p.zeros = zeros.as<std::uint8_t>();
  std::vector<float> tq, ta, tc;
  for (int it = 0; it < iters + 1; ++it) {
    host::event a, b, c, d, e;
    NUMPROBE_GPU_CHECK(EventRecord, a.get(), nullptr);
    NUMPROBE_GPU_CHECK(Memcpy, y.as<void>(), x.as<void>(), static_cast<std::size_t>(n) * 4, platform::memcpy_d2d);
    NUMPROBE_GPU_CHECK(EventRecord, b.get(), nullptr);
    if (needs_tensor_pass(p)) tensor_pass(p, amax.as<unsigned>(), tscale.as<float>());
    NUMPROBE_GPU_CHECK(EventRecord, c.get(), nullptr);
    launch(p);
    NUMPROBE_GPU_CHECK(EventRecord, d.get(), nullptr);
    if (it == 0) {
      (void)host::elapsed_ms(a, d);  // warm-up
      continue;
    }
    tc.push_back(host::elapsed_ms(a, b));
    ta.push_back(host::elapsed_ms(b, c));
    tq.push_back(host::elapsed_ms(c, d));
  }
  const auto med = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : static_cast<double>(v[v.size() / 2]);
  };
  quant_bandwidth bw;
  bw.copy_ms = med(tc);
  bw.amax_ms = med(ta);
  bw.quant_ms = med(tq);
  bw.copy_bytes = 2.0 * static_cast<double>(n) * 4;
  bw.quant_bytes = static_cast<double>(n) * 4 + static_cast<double>(r.rows * p.row_bytes) +
                   static_cast<double>(stored_scales(p) * p.scale_bytes) +
                   static_cast<double>(r.kind == quant_kind::m_asym ? p.n_blocks : 0);
  bw.copy_gbs = bw.copy_bytes / (bw.copy_ms * 1e6);
  bw.quant_gbs = bw.quant_bytes / (bw.quant_ms * 1e6);
  NUMPROBE_GPU_CHECK(DeviceSynchronize);
  return bw;
}

quant_device_result quantize_impl(const quant_request& r) { return run_quantize(r, quant::launch_quantize); }

quant_bandwidth bandwidth_impl(const quant_request& shape, std::int64_t bytes, int iters) {
  return run_bandwidth(shape, bytes, iters, quant::launch_quantize);
}

}  // namespace

quant_device_result quant::quantize_with(const quant_request& r, launch_fn launch) { return run_quantize(r, launch); }

quant_bandwidth quant::bandwidth_with(const quant_request& shape, std::int64_t bytes, int iters, launch_fn launch) {
  return run_bandwidth(shape, bytes, iters, launch);
}

const quant_api& NUMPROBE_GPU_QUANT_API_NAME() {
  static const quant_api api{platform::vendor, &quantize_impl, &bandwidth_impl};
  return api;
}

}  // namespace numprobe::gpu
