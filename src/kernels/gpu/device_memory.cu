// device_memory_api: the runtime calls the plugin provider needs for device-memory plugins
// (gpu_api.hpp), one source for CUDA and HIP.
#include <string>

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/gpu_check.cuh"
#include "src/kernels/gpu/gpu_host_util.cuh"

namespace numprobe::gpu {
namespace {

int count_impl() {
  int n = 0;
  if (NUMPROBE_GPU_API(GetDeviceCount)(&n) != platform::success) {
    (void)NUMPROBE_GPU_API(GetLastError)();
    return 0;
  }
  return n;
}

void* alloc_impl(int device, std::size_t bytes) {
  host::select_device(device);
  void* p = nullptr;
  const auto e = NUMPROBE_GPU_API(Malloc)(&p, bytes == 0 ? 1 : bytes);
  if (e != platform::success)
    throw_backend_error(platform::vendor, std::string(platform::vendor) + "Malloc(" +
                                              std::to_string(bytes) + " bytes) failed: " +
                                              platform::error_string(e));
  return p;
}

void release_impl(void* p) noexcept {
  if (p) (void)NUMPROBE_GPU_API(Free)(p);
}

void to_device_impl(void* dst, const void* src, std::size_t bytes) {
  NUMPROBE_GPU_CHECK(Memcpy, dst, src, bytes, platform::memcpy_h2d);
}

void to_host_impl(void* dst, const void* src, std::size_t bytes) {
  NUMPROBE_GPU_CHECK(Memcpy, dst, src, bytes, platform::memcpy_d2h);
}

void fill_impl(void* p, int byte, std::size_t bytes) {
  NUMPROBE_GPU_CHECK(Memset, p, byte, bytes);
  NUMPROBE_GPU_CHECK(DeviceSynchronize);
}

void* create_stream_impl(int device) {
  host::select_device(device);
  platform::stream_t s{};
  NUMPROBE_GPU_CHECK(StreamCreateWithFlags, &s, NUMPROBE_GPU_API(StreamNonBlocking));
  return static_cast<void*>(s);
}

void destroy_stream_impl(void* s) noexcept {
  if (s) (void)NUMPROBE_GPU_API(StreamDestroy)(static_cast<platform::stream_t>(s));
}

void synchronize_impl(void* s) {
  NUMPROBE_GPU_CHECK(StreamSynchronize, static_cast<platform::stream_t>(s));
  NUMPROBE_GPU_CHECK(GetLastError);
}

}  // namespace

#if defined(NUMPROBE_GPU_HIP)
const device_memory_api& hip_device_memory_api() {
#else
const device_memory_api& cuda_device_memory_api() {
#endif
  static const device_memory_api api{platform::vendor,  &count_impl,         &alloc_impl,
                                     &release_impl,     &to_device_impl,     &to_host_impl,
                                     &fill_impl,        &create_stream_impl, &destroy_stream_impl,
                                     &synchronize_impl};
  return api;
}

}  // namespace numprobe::gpu
