// The device behind `numprobe mma` (mma_device.hpp).
#include "src/providers/mma_device.hpp"

#include <fmt/format.h>

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
gpu::mma_probe_op op_for(mma_family family, formats::format_id input, int k) {
  using formats::format_id;
  using op = gpu::mma_probe_op;
  const bool w = family == mma_family::m_wgmma;
  if (input == format_id::m_f16 && k == 16) return w ? op::m_wgmma_f16_k16 : op::m_f16_k16;
  if (input == format_id::m_bf16 && k == 16) return w ? op::m_wgmma_bf16_k16 : op::m_bf16_k16;
  if (input == format_id::m_tf32 && k == 8) return w ? op::m_wgmma_tf32_k8 : op::m_tf32_k8;
  if (input == format_id::m_e4m3fn && k == 32) return w ? op::m_wgmma_e4m3_k32 : op::m_e4m3_k32;
  if (input == format_id::m_e5m2 && k == 32) return w ? op::m_wgmma_e5m2_k32 : op::m_e5m2_k32;
  throw_input_error("mma", fmt::format("no {} probe kernel for {} with k = {}", w ? "wgmma" : "mma.sync",
                                       formats::name(input), k));
}
#endif

}  // namespace

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

std::string mma_device_unsupported(mma_family family, formats::format_id input, int k, int arch) {
#if NUMPROBE_HAVE_CUDA
  // The kernels' own rule (mma_probe_unsupported), so the two cannot disagree.
  return gpu::mma_probe_unsupported(op_for(family, input, k), arch);
#else
  (void)family;
  (void)input;
  (void)k;
  (void)arch;
  return "needs a GPU: this numprobe was built without CUDA";
#endif
}

std::vector<double> run_mma_on_device(int ordinal, mma_family family, formats::format_id input, int k,
                                      std::span<const double> a, std::span<const double> b,
                                      std::span<const double> c) {
#if NUMPROBE_HAVE_CUDA
  const gpu::mma_probe_op op = op_for(family, input, k);
  if (a.size() != b.size() || a.size() != c.size() * static_cast<std::size_t>(k))
    throw_input_error("mma", fmt::format("{} a, {} b values for {} dot products of k = {}", a.size(), b.size(),
                                         c.size(), k));
  // Values of the input format (and fp32 C): exact as float.
  const std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end()), fc(c.begin(), c.end());
  const std::vector<float> d =
      gpu::cuda_mma_probe(ordinal, op, static_cast<int>(c.size()), fa.data(), fb.data(), fc.data());
  return {d.begin(), d.end()};
#else
  (void)ordinal;
  (void)family;
  (void)input;
  (void)k;
  (void)a;
  (void)b;
  (void)c;
  no_gpu_build();
#endif
}

}  // namespace numprobe::providers
