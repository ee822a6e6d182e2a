#pragma once
// Registration hooks of the built-in providers (called once by the registry).
#if __has_include("src/providers/cuda_provider.hpp") && NUMPROBE_HAVE_CUDA
#include "src/providers/cuda_provider.hpp"
#endif
#if __has_include("src/providers/hip_provider.hpp") && NUMPROBE_HAVE_HIP
#include "src/providers/hip_provider.hpp"
#endif

namespace numprobe {
void register_ref_provider();
void register_emu_provider();
void register_exec_provider();    // exec:CMD and exec-worker:CMD (exec_provider.cpp)
void register_plugin_provider();  // plugin:lib.so (plugin_provider.cpp)
}  // namespace numprobe
