// The shared fault table (src/kernels/fault_table.hpp): every name parses back to its fault,
// the GPU bits are distinct single bits, and the emulator's and the GPU providers' views of
// which kernel a fault applies to come from it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/flash_attention.hpp"
#include "src/kernels/emu/flash_decode.hpp"
#include "src/kernels/emu/looped_softmax.hpp"
#include "src/kernels/fault_table.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/gpu_faults.hpp"

namespace numprobe {
namespace {

TEST(fault_table, names_round_trip_and_bits_are_distinct) {
  std::set<std::string_view> names;
  std::uint32_t seen = 0;
  for (const auto& e : kernels::k_fault_table) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_EQ(emu::parse_fault(e.name), e.id);
    EXPECT_EQ(emu::to_string(e.id), e.name);
    if (e.gpu_bit != 0) {
      EXPECT_EQ(e.gpu_bit & (e.gpu_bit - 1), 0u) << e.name << ": one bit";
      EXPECT_EQ(seen & e.gpu_bit, 0u) << e.name << ": bit used twice";
      seen |= e.gpu_bit;
    }
    // A fault with a GPU variant applies to some GPU kernel, and only then.
    EXPECT_EQ(e.gpu_bit != 0, (e.scopes & (kernels::k_gpu_forward | kernels::k_gpu_decode |
                                           kernels::k_gpu_softmax)) != 0) << e.name;
  }
  EXPECT_EQ(emu::all_faults().size(), kernels::k_fault_table.size());
  EXPECT_THROW((void)emu::parse_fault("no-such-fault"), error);
}

TEST(fault_table, emulator_scopes) {
  EXPECT_TRUE(emu::softmax_fault_supported(emu::fault::m_rowsum_bf16));
  EXPECT_FALSE(emu::softmax_fault_supported(emu::fault::m_skip_rescale));
  EXPECT_TRUE(emu::decode_fault_supported(emu::fault::m_empty_split_nan));
  EXPECT_FALSE(emu::decode_fault_supported(emu::fault::m_wave_width));
  EXPECT_EQ(kernels::fault_names(kernels::k_gpu_decode), "gqa-mod, index-wrap, empty-split-nan");
  EXPECT_EQ(gpu::k_decode_faults, gpu::k_fault_gqa_mod | gpu::k_fault_index_wrap | gpu::k_fault_empty_split_nan);
}

TEST(fault_table, gpu_provider_parsing) {
  EXPECT_EQ(parse_gpu_faults({"skip-rescale"}, "cuda", gpu_kernel::m_forward).bit, gpu::k_fault_skip_rescale);
  EXPECT_EQ(parse_gpu_faults({"index-wrap"}, "cuda", gpu_kernel::m_decode).bit, gpu::k_fault_index_wrap);
  EXPECT_EQ(parse_gpu_faults({"rowsum-bf16"}, "cuda", gpu_kernel::m_softmax).bit, gpu::k_fault_rowsum_bf16);
  EXPECT_EQ(parse_gpu_faults({}, "cuda", gpu_kernel::m_forward).bit, 0u);
  EXPECT_THROW((void)parse_gpu_faults({"wave-width"}, "cuda", gpu_kernel::m_forward), error);
  EXPECT_THROW((void)parse_gpu_faults({"merge-nan-empty"}, "cuda", gpu_kernel::m_decode), error);
  EXPECT_THROW((void)parse_gpu_faults({"skip-rescale"}, "cuda", gpu_kernel::m_decode), error);
  EXPECT_THROW((void)parse_gpu_faults({"empty-split-nan"}, "cuda", gpu_kernel::m_forward), error);
  EXPECT_THROW((void)parse_gpu_faults({"skip-rescale"}, "cuda", gpu_kernel::m_softmax), error);
  EXPECT_THROW((void)parse_gpu_faults({"skip-rescale", "stale-max"}, "cuda", gpu_kernel::m_forward), error);
}

}  // namespace
}  // namespace numprobe
