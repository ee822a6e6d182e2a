// Instantiations of the flash-attention forward kernels for fp16 inputs (one file per dtype so
// that the two compile in parallel).
#include "src/kernels/gpu/flash_attention_dispatch.cuh"

namespace numprobe::gpu {
template void dispatch_flash<platform::fp16>(const flash_params<platform::fp16>&, int, std::uint32_t,
                                             attention_path, platform::stream_t);
}  // namespace numprobe::gpu
