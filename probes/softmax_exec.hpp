#pragma once
// `numprobe softmax --backend exec:'CMD'`: a user's softmax kernel as an external program, with
// the file convention of the attention exec backend (examples/exec/README.md, "softmax"):
//   in:  x.npy [R, V] logits (float32; float64 for f64 cases; exact in the case dtype, -inf at
//        masked entries) and case.json (the case under the CLI's own names, row targets)
//   out: y.npy [R, V] probabilities and/or logp.npy [R, V] log-probabilities (at least one;
//        float32, float16, bf16 or float64), optional lse.npy [R] (natural log, -inf for a fully
//        masked row). Without lse.npy the kernel's LSE is read off its own output at the row
//        maximum: z_max - log p(argmax).
#include <memory>

#include "probes/softmax_probe.hpp"

namespace numprobe::probes {

// o.backend is "exec:CMD". Throws an input error (exit 2) for options an external program cannot
// honour (faults, state dtypes) or a bad command line.
[[nodiscard]] std::unique_ptr<softmax_kernel> make_exec_softmax_kernel(const softmax_kernel_options& o);

}  // namespace numprobe::probes
