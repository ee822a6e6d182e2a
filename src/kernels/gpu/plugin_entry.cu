// numprobe_cuda_plugin: the built-in GPU kernels exported through the plugin ABI
// (include/numprobe/kernel_abi.h), so that `--backend plugin:libnumprobe_cuda_plugin.so` runs
// exactly the kernels `--backend cuda` runs, on device pointers and numprobe's stream. The
// functions are the entries of the table numprobe itself registers its cuda backend from
// (builtin_kernel_table.cu); this file only gives them their exported C names.
#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/builtin_kernel_table.hpp"

namespace {
const numprobe_kernel_table& table() { return numprobe::gpu::cuda_builtin_kernel_table(); }
}  // namespace

extern "C" {

NUMPROBE_PLUGIN_EXPORT uint32_t numprobe_kernel_abi_version(void) { return table().abi_version(); }

NUMPROBE_PLUGIN_EXPORT int numprobe_kernel_capabilities(numprobe_capabilities* caps) {
  return table().capabilities(caps);
}

NUMPROBE_PLUGIN_EXPORT int numprobe_attention_forward(const numprobe_attention_params* p) {
  return table().attention_forward(p);
}

NUMPROBE_PLUGIN_EXPORT int numprobe_attention_decode(const numprobe_decode_params* p) {
  return table().attention_decode(p);
}

NUMPROBE_PLUGIN_EXPORT int numprobe_attention_forward_variant(const numprobe_attention_params* p,
                                                              const numprobe_kernel_variant* v) {
  return table().forward_variant(p, v);
}

NUMPROBE_PLUGIN_EXPORT int numprobe_attention_decode_variant(const numprobe_decode_params* p,
                                                             const numprobe_decode_variant* v) {
  return table().decode_variant(p, v);
}

NUMPROBE_PLUGIN_EXPORT const char* numprobe_kernel_last_error(void) { return table().last_error(); }

}  // extern "C"
