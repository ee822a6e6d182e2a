#include "src/providers/gpu_faults.hpp"

#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/flash_attention.hpp"
#include "src/kernels/fault_table.hpp"

namespace numprobe {
namespace {

using kernels::fault;

// One name: an unknown name is the emulator's error (every name listed); a fault without a
// variant in this kernel names the fault and where it runs.
std::uint32_t attention_bit(const std::string& text, const std::string& vendor, bool decode) {
  const fault f = emu::parse_fault(text, "--inject");
  if (f == fault::m_wave_width)
    throw_input_error("--inject", vendor == "cuda"
                                      ? "wave-width has no cuda variant: NVIDIA warps are 32 wide, so a "
                                        "32-wide reduction tree is exact there (the fault needs a 64-wide "
                                        "wavefront); use --backend emu"
                                      : "wave-width has no hip variant: the built-in kernels reduce no "
                                        "row across a wavefront (one row per thread, quad shuffles); use "
                                        "--backend emu");
  const std::uint32_t bit = kernels::gpu_bit(f);
  if (bit == 0)
    throw_input_error("--inject", fmt::format("fault '{}' has no {} variant (they are {}); use --backend emu",
                                              text, vendor,
                                              kernels::fault_names(kernels::k_gpu_forward | kernels::k_gpu_decode)));
  if (decode && !kernels::applies(f, kernels::k_gpu_decode))
    throw_input_error("--inject", fmt::format("fault '{}' has no variant in the {} decode kernel (it has "
                                              "{}); use --backend emu",
                                              text, vendor, kernels::fault_names(kernels::k_gpu_decode)));
  if (!decode && !kernels::applies(f, kernels::k_gpu_forward))
    throw_input_error("--inject", fmt::format("fault '{}' needs --decode", text));
  return bit;
}

std::uint32_t softmax_bit(const std::string& text, const std::string& vendor) {
  fault f{};
  if (!kernels::find_fault(text, f) || !kernels::applies(f, kernels::k_gpu_softmax))
    throw_input_error("--inject", fmt::format("fault '{}' is not compiled into the {} softmax "
                                              "(it has {})",
                                              text, vendor, kernels::fault_names(kernels::k_gpu_softmax)));
  return kernels::gpu_bit(f);
}

}  // namespace

gpu_fault_choice parse_gpu_faults(const std::vector<std::string>& faults, const std::string& vendor,
                                  gpu_kernel kernel) {
  gpu_fault_choice out;
  for (const auto& f : faults) {
    const std::uint32_t bit = kernel == gpu_kernel::m_softmax
                                  ? softmax_bit(f, vendor)
                                  : attention_bit(f, vendor, kernel == gpu_kernel::m_decode);
    if (out.bit != 0 && out.bit != bit)
      throw_input_error("--inject", kernel == gpu_kernel::m_softmax
                                        ? "the GPU softmax compiles one fault per variant; inject one"
                                        : "the GPU kernels compile one fault per variant; inject one");
    out.bit = bit;
    out.name = f;
  }
  return out;
}

}  // namespace numprobe
