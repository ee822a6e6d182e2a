#pragma once
// Between the probe harness (mma_probe.cu) and the wgmma kernels (wgmma_probe.cu, compiled for
// sm_90a alone in its own object library): device pointers in, one output per dot product out.
#include "src/kernels/gpu/mma_probe.hpp"

namespace numprobe::gpu {

// Launches count warpgroups of the wgmma probe for `op` (a wgmma op) on the current device;
// every D element that differs from D(0,0) adds one to *mismatches.
void launch_wgmma_probe(mma_probe_op op, int count, const float* a, const float* b, const float* c, float* d, int k,
                        unsigned* mismatches);

}  // namespace numprobe::gpu
