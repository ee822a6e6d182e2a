#pragma once
// `numprobe softmax --backend cuda`: the GPU looped softmax kernel (src/kernels/gpu/
// looped_softmax.cuh) behind the softmax_kernel interface.
#include <memory>

#include "probes/softmax_probe.hpp"

namespace numprobe::probes {

// Throws a backend error (exit 3) when the build has no CUDA or no device is visible, an input
// error (exit 2) for options the kernel cannot honour (state dtypes, exp2, unknown faults).
[[nodiscard]] std::unique_ptr<softmax_kernel> make_cuda_softmax_kernel(const softmax_kernel_options& o);

}  // namespace numprobe::probes
