#pragma once
// The built-in GPU kernels as a plugin ABI table (numprobe/kernel_abi.h): the same functions
// numprobe_cuda_plugin exports, obtained from the linked-in kernels instead of a dlopen'd .so.
// `--backend cuda` and `hip` register their forward through it, and `--backend cuda --decode` its
// split-KV decode (src/providers/cuda_provider.cpp).
// Plain C++ (no vendor headers), like gpu_api.hpp.
#include <cstdint>
#include <exception>
#include <initializer_list>

#include "numprobe/kernel_abi.h"

namespace numprobe::gpu {

// Defined only in builds that compiled the kernels for that vendor (builtin_kernel_table.cu).
[[nodiscard]] const numprobe_kernel_table& cuda_builtin_kernel_table();
[[nodiscard]] const numprobe_kernel_table& hip_builtin_kernel_table();

// The exception behind the calling thread's last non-zero status of a table entry (null when
// the refusal was the ABI layer's own): in numprobe's process the provider rethrows it, so an
// error keeps the exit code and text the kernels gave it (the ABI carries a status and a text).
[[nodiscard]] std::exception_ptr builtin_last_exception();

// A dense C-order tensor over `data` (strides in elements, scale 1): how the GPU backends
// describe their own device buffers to a table entry.
[[nodiscard]] inline numprobe_tensor dense_abi_tensor(const void* data, int dtype,
                                                      std::initializer_list<std::int64_t> shape) {
  numprobe_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.scale = 1.f;
  int i = 0;
  for (const std::int64_t n : shape) t.shape[i++] = n;
  std::int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

}  // namespace numprobe::gpu
