// Host side of the looped softmax kernel: validation, buffers (outputs poisoned with NaN),
// launch by dtype and fault variant, timing. Exports cuda_softmax_api() / hip_softmax_api().
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/gpu_host_util.cuh"
#include "src/kernels/gpu/looped_softmax.cuh"

namespace numprobe::gpu {
namespace {

template <class T>
__global__ void logits_to(const float* __restrict__ in, T* __restrict__ out, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = platform::from_float<T>(in[i]);
}

template <class T, std::uint32_t F>
void launch(const softmax::params<T>& p, std::int64_t rows) {
  softmax::looped_softmax<T, F><<<static_cast<unsigned>(rows), softmax::k_threads>>>(p);
  check_launch("looped_softmax");
}

template <class T>
softmax_device_result run_typed(const softmax_request& r) {
  const std::int64_t n = r.rows * r.vocab;
  host::buffer staging(std::is_same_v<T, float> ? 0 : static_cast<std::size_t>(n) * 4, "staging");
  host::buffer x(static_cast<std::size_t>(n) * sizeof(T), "logits");
  host::buffer tgt(static_cast<std::size_t>(r.rows) * 8, "targets");
  host::buffer pb(static_cast<std::size_t>(n) * 4, "p"), lpb(static_cast<std::size_t>(n) * 4, "logp");
  host::buffer lse(static_cast<std::size_t>(r.rows) * 4, "lse"), ce(static_cast<std::size_t>(r.rows) * 4, "ce");
  if constexpr (std::is_same_v<T, float>) {
    NUMPROBE_GPU_CHECK(Memcpy, x.as<void>(), r.logits, n * 4, platform::memcpy_h2d);
  } else {
    NUMPROBE_GPU_CHECK(Memcpy, staging.as<void>(), r.logits, n * 4, platform::memcpy_h2d);
    const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>((n + 255) / 256, 1, 65536));
    logits_to<T><<<blocks, 256>>>(staging.as<float>(), x.as<T>(), n);
    check_launch("logits_to");
  }
  NUMPROBE_GPU_CHECK(Memcpy, tgt.as<void>(), r.targets, r.rows * 8, platform::memcpy_h2d);
  pb.poison();
  lpb.poison();
  lse.poison();
  ce.poison();
  softmax::params<T> p;
  p.x = x.as<T>();
  p.target = tgt.as<std::int64_t>();
  p.p = pb.as<float>();
  p.logp = lpb.as<float>();
  p.lse = lse.as<float>();
  p.ce = ce.as<float>();
  p.vocab = r.vocab;
  p.chunk = r.chunk;
  p.temperature = r.temperature;
  p.softcap = r.softcap;
  host::event e0, e1;
  NUMPROBE_GPU_CHECK(EventRecord, e0.get(), nullptr);
  switch (r.faults) {
    case k_fault_none: launch<T, k_fault_none>(p, r.rows); break;
    case k_fault_no_empty_guard: launch<T, k_fault_no_empty_guard>(p, r.rows); break;
    case k_fault_rowsum_bf16: launch<T, k_fault_rowsum_bf16>(p, r.rows); break;
    case k_fault_finite_sentinel: launch<T, k_fault_finite_sentinel>(p, r.rows); break;
    default:
      throw_input_error("--inject", "the GPU softmax compiles " +
                                        kernels::fault_names(kernels::k_gpu_softmax) + ", one at a time");
  }
  NUMPROBE_GPU_CHECK(EventRecord, e1.get(), nullptr);
  softmax_device_result out;
  out.kernel_ms = host::elapsed_ms(e0, e1);
  out.p.resize(static_cast<std::size_t>(n));
  out.logp.resize(static_cast<std::size_t>(n));
  out.lse.resize(static_cast<std::size_t>(r.rows));
  out.ce.resize(static_cast<std::size_t>(r.rows));
  NUMPROBE_GPU_CHECK(Memcpy, out.p.data(), pb.as<void>(), n * 4, platform::memcpy_d2h);
  NUMPROBE_GPU_CHECK(Memcpy, out.logp.data(), lpb.as<void>(), n * 4, platform::memcpy_d2h);
  NUMPROBE_GPU_CHECK(Memcpy, out.lse.data(), lse.as<void>(), r.rows * 4, platform::memcpy_d2h);
  NUMPROBE_GPU_CHECK(Memcpy, out.ce.data(), ce.as<void>(), r.rows * 4, platform::memcpy_d2h);
  NUMPROBE_GPU_CHECK(DeviceSynchronize);
  return out;
}

softmax_device_result softmax_impl(const softmax_request& r) {
  if (r.rows < 1 || r.rows > 2147483647) throw_input_error("--rows", "the GPU softmax takes 1 .. 2^31-1 rows");
  if (r.vocab < 1) throw_input_error("--vocab", "must be positive");
  if (r.chunk < 1 || r.chunk > (std::int64_t{1} << 24))
    throw_input_error("--chunk", "must be in [1, 2^24]");
  if (!(r.temperature > 0.f)) throw_input_error("--temperature", "must be > 0");
  if (!(r.softcap >= 0.f)) throw_input_error("--softcap", "must be >= 0");
  if (!r.logits || !r.targets) throw_input_error("softmax", "missing logits or targets");
  for (std::int64_t i = 0; i < r.rows; ++i)
    if (r.targets[i] >= r.vocab) throw_input_error("softmax", "target index out of range");
  host::select_device(r.device);
  switch (r.dtype) {
    case softmax_dtype::m_f16: return run_typed<platform::fp16>(r);
    case softmax_dtype::m_f32: return run_typed<float>(r);
    default: return run_typed<platform::bf16>(r);
  }
}

}  // namespace

#if defined(NUMPROBE_GPU_HIP)
const softmax_api& hip_softmax_api() {
#else
const softmax_api& cuda_softmax_api() {
#endif
  static const softmax_api api{platform::vendor, &softmax_impl};
  return api;
}

}  // namespace numprobe::gpu
