// `--backend hip`: registered only in builds with CMake's HIP language (NUMPROBE_HAVE_HIP).
#include "src/providers/hip_provider.hpp"

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/cuda_provider.hpp"

namespace numprobe {

std::unique_ptr<attention_provider> make_hip_provider(const provider_options& o) {
#if NUMPROBE_HAVE_HIP
  return make_gpu_attention_provider(gpu::hip_api(), o);
#else
  (void)o;
  throw_backend_error("--backend hip", "the hip backend is not compiled into this build");
#endif
}

std::vector<nlohmann::json> hip_devices() {
#if NUMPROBE_HAVE_HIP
  return gpu_devices(gpu::hip_api());
#else
  return {};
#endif
}

void register_hip_provider() {
#if NUMPROBE_HAVE_HIP
  register_attention_provider(
      "hip", &make_hip_provider,
      "built-in flash-attention forward on an AMD GPU (scalar fp32 path; same source as cuda)");
#endif
}

}  // namespace numprobe
