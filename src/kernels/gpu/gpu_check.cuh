#pragma once
// Every runtime call is checked; a failure throws a backend error (exit 3) that names the call
// and carries the runtime's own error text.
#include <string>

#include "numprobe/base/error.hpp"
#include "src/kernels/gpu/platform.cuh"

namespace numprobe::gpu {

[[noreturn]] inline void fail_call(const char* fn, platform::error_t e) {
  throw_backend_error(platform::vendor, std::string(platform::vendor) + fn + " failed: " +
                                            platform::error_string(e));
}

// NUMPROBE_GPU_CHECK(Malloc, &p, n) calls cudaMalloc / hipMalloc and names it on failure.
#define NUMPROBE_GPU_CHECK(fn, ...)                                          \
  do {                                                                       \
    const auto numprobe_err_ = NUMPROBE_GPU_API(fn)(__VA_ARGS__);            \
    if (numprobe_err_ != ::numprobe::gpu::platform::success)                 \
      ::numprobe::gpu::fail_call(#fn, numprobe_err_);                        \
  } while (0)

inline void check_launch(const char* kernel) {
  const auto e = NUMPROBE_GPU_API(GetLastError)();
  if (e != platform::success)
    throw_backend_error(platform::vendor, std::string("launch of ") + kernel + " failed: " +
                                              platform::error_string(e));
}

}  // namespace numprobe::gpu
