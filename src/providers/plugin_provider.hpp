#pragma once
// `--backend plugin:lib.so`: a kernel in a shared library speaking numprobe/kernel_abi.h.
// Loading checks the ABI version and the required symbols; each case is checked against the
// plugin's capabilities before the call. Every refusal names the plugin file and the function.
namespace numprobe {
void register_plugin_provider();
}  // namespace numprobe
