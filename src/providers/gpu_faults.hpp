#pragma once
// `--inject` for the built-in GPU kernels: the fault names of the shared table
// (src/kernels/fault_table.hpp) turned into the one GPU variant bit a launch takes.
#include <cstdint>
#include <string>
#include <vector>

namespace numprobe {

enum class gpu_kernel : std::uint8_t { m_forward, m_decode, m_softmax };

struct gpu_fault_choice {
  std::uint32_t bit = 0;  // gpu::fault_bits; 0: fault-free
  std::string name;       // as given
};

// The GPU variant for `faults` (at most one: the kernels compile one fault per variant) in the
// `vendor` ("cuda" | "hip") `kernel`. Input errors (exit 2) name --inject and the faults that
// kernel has: an unknown name lists every fault, a fault without a GPU variant points to emu.
[[nodiscard]] gpu_fault_choice parse_gpu_faults(const std::vector<std::string>& faults,
                                                const std::string& vendor, gpu_kernel kernel);

}  // namespace numprobe
