// The device behind `numprobe mma` (mma_device.hpp).
#include "src/providers/mma_device.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "numprobe/base/error.hpp"
#if NUMPROBE_HAVE_CUDA
#include "src/kernels/gpu/mma_probe.hpp"
#endif

namespace numprobe::providers {
namespace {

#if !NUMPROBE_HAVE_CUDA
[[noreturn]] void no_gpu_build() {
  throw_backend_error("mma", "needs a GPU: this numprobe was built without CUDA, so it has no tensor-core probe "
                             "kernels (build on a machine with the CUDA toolkit; docs/hardware.md)");
}
#endif

#if NUMPROBE_HAVE_CUDA
gpu::mma_probe_op op_for(const mma_instruction& i) {
  using formats::format_id;
  using op = gpu::mma_probe_op;
  const bool w = i.family == mma_family::m_wgmma;
  if (i.family == mma_family::m_wgmma_rs && i.accumulator == mma_accumulator::m_f32) {
    if (i.input == format_id::m_f16 && i.k == 16) return op::m_wgmma_rs_f16_k16;
    if (i.input == format_id::m_bf16 && i.k == 16) return op::m_wgmma_rs_bf16_k16;
    if (i.input == format_id::m_tf32 && i.k == 8) return op::m_wgmma_rs_tf32_k8;
    if (i.input == format_id::m_e4m3fn && i.k == 32) return op::m_wgmma_rs_e4m3_k32;
    if (i.input == format_id::m_e5m2 && i.k == 32) return op::m_wgmma_rs_e5m2_k32;
  }
  if (i.family == mma_family::m_wgmma_rs)
    throw_input_error("mma", fmt::format("no wgmma (A in registers) probe kernel for {} with k = {} and a {} accumulator",
                                         formats::name(i.input), i.k, mma_accumulator_name(i.accumulator)));
  switch (i.accumulator) {
    case mma_accumulator::m_f32:
      if (i.input == format_id::m_f16 && i.k == 16) return w ? op::m_wgmma_f16_k16 : op::m_f16_k16;
      if (i.input == format_id::m_bf16 && i.k == 16) return w ? op::m_wgmma_bf16_k16 : op::m_bf16_k16;
      if (i.input == format_id::m_tf32 && i.k == 8) return w ? op::m_wgmma_tf32_k8 : op::m_tf32_k8;
      if (i.input == format_id::m_e4m3fn && i.k == 32) return w ? op::m_wgmma_e4m3_k32 : op::m_e4m3_k32;
      if (i.input == format_id::m_e5m2 && i.k == 32) return w ? op::m_wgmma_e5m2_k32 : op::m_e5m2_k32;
      break;
    case mma_accumulator::m_f16:
      if (i.input == format_id::m_f16 && i.k == 16) return w ? op::m_wgmma_f16_k16_f16acc : op::m_f16_k16_f16acc;
      if (i.input == format_id::m_e4m3fn && i.k == 32)
        return w ? op::m_wgmma_e4m3_k32_f16acc : op::m_e4m3_k32_f16acc;
      if (i.input == format_id::m_e5m2 && i.k == 32) return w ? op::m_wgmma_e5m2_k32_f16acc : op::m_e5m2_k32_f16acc;
      break;
    case mma_accumulator::m_s32:
      if (i.input == format_id::m_i8 && i.k == 32) return w ? op::m_wgmma_s8_k32 : op::m_s8_k32;
      break;
    case mma_accumulator::m_s32_satfinite:
      if (i.input == format_id::m_i8 && i.k == 32) return w ? op::m_wgmma_s8_k32_sat : op::m_s8_k32_sat;
      break;
  }
  throw_input_error("mma", fmt::format("no {} probe kernel for {} with k = {} and a {} accumulator",
                                       w ? "wgmma" : "mma.sync", formats::name(i.input), i.k,
                                       mma_accumulator_name(i.accumulator)));
}
#endif

}  // namespace

const char* mma_accumulator_name(mma_accumulator a) {
  switch (a) {
    case mma_accumulator::m_f32: return "f32";
    case mma_accumulator::m_f16: return "f16";
    case mma_accumulator::m_s32: return "s32";
    case mma_accumulator::m_s32_satfinite: return "s32.satfinite";
  }
  return "?";
}

bool mma_device_built() {
#if NUMPROBE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

mma_device_info mma_device(int ordinal) {
#if NUMPROBE_HAVE_CUDA
  const gpu::mma_probe_device d = gpu::cuda_mma_probe_device(ordinal);
  return {d.ordinal, d.name, d.arch};
#else
  (void)ordinal;
  no_gpu_build();
#endif
}

std::string mma_device_unsupported(const mma_instruction& op, int arch) {
#if NUMPROBE_HAVE_CUDA
  // The kernels' own rule (mma_probe_unsupported), so the two cannot disagree.
  return gpu::mma_probe_unsupported(op_for(op), arch);
#else
  (void)op;
  (void)arch;
  return "needs a GPU: this numprobe was built without CUDA";
#endif
}

std::vector<double> run_mma_on_device(int ordinal, const mma_instruction& op, std::span<const double> a,
                                      std::span<const double> b, std::span<const double> c) {
#if NUMPROBE_HAVE_CUDA
  const gpu::mma_probe_op kernel = op_for(op);
  const auto k = static_cast<std::size_t>(op.k);
  if (a.size() != b.size() || a.size() != c.size() * k)
    throw_input_error("mma", fmt::format("{} a, {} b values for {} dot products of k = {}", a.size(), b.size(),
                                         c.size(), k));
  // A and B: values of the input format, exact as float. C and D: accumulator words (fp32 bits,
  // an fp16 value widened to fp32, or s32).
  const bool integer = gpu::mma_probe_accumulator(kernel) == gpu::mma_probe_acc::m_s32;
  const std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end());
  std::vector<std::uint32_t> wc;
  wc.reserve(c.size());
  for (const double x : c) {
    if (integer && !(x == std::trunc(x) && x >= -0x1p31 && x < 0x1p31))
      throw_input_error("mma", fmt::format("c {:.17g} is not an s32 value", x));
    wc.push_back(integer ? static_cast<std::uint32_t>(static_cast<std::int32_t>(x))
                         : std::bit_cast<std::uint32_t>(static_cast<float>(x)));
  }
  const std::vector<std::uint32_t> d =
      gpu::cuda_mma_probe(ordinal, kernel, static_cast<int>(c.size()), fa.data(), fb.data(), wc.data());
  std::vector<double> out;
  out.reserve(d.size());
  for (const std::uint32_t w : d)
    out.push_back(integer ? static_cast<double>(static_cast<std::int32_t>(w))
                          : static_cast<double>(std::bit_cast<float>(w)));
  return out;
#else
  (void)ordinal;
  (void)op;
  (void)a;
  (void)b;
  (void)c;
  no_gpu_build();
#endif
}

}  // namespace numprobe::providers
