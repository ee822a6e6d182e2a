// Instantiations of the flash-attention forward kernels for bf16 inputs (one file per dtype so
// that the two compile in parallel).
#include "src/kernels/gpu/flash_attention_dispatch.cuh"

namespace numprobe::gpu {
template void dispatch_flash<platform::bf16>(const flash_params<platform::bf16>&, int, std::uint32_t,
                                             attention_path, platform::stream_t);
}  // namespace numprobe::gpu
