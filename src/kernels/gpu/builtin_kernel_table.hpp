#pragma once
// The built-in GPU kernels as a plugin ABI table (numprobe/kernel_abi.h): the same functions
// numprobe_cuda_plugin exports, obtained from the linked-in kernels instead of a dlopen'd .so.
// `--backend cuda` and `hip` register their forward through it (src/providers/cuda_provider.cpp).
// Plain C++ (no vendor headers), like gpu_api.hpp.
#include <exception>

#include "numprobe/kernel_abi.h"

namespace numprobe::gpu {

// Defined only in builds that compiled the kernels for that vendor (builtin_kernel_table.cu).
[[nodiscard]] const numprobe_kernel_table& cuda_builtin_kernel_table();
[[nodiscard]] const numprobe_kernel_table& hip_builtin_kernel_table();

// The exception behind the calling thread's last non-zero status of a table entry (null when
// the refusal was the ABI layer's own): in numprobe's process the provider rethrows it, so an
// error keeps the exit code and text the kernels gave it (the ABI carries a status and a text).
[[nodiscard]] std::exception_ptr builtin_last_exception();

}  // namespace numprobe::gpu
