// Every compiled fault variant of the GPU kernel is detected on real hardware, under the input
// family designed to expose it (NUMERICS.md, "Real bug classes"), by the same bound the clean
// kernel passes on the same case: rel RMS <= 2 x naive, LSE within its bound, no NaN, masked
// rows exact. (finite-sentinel is caught by the LSE: its O = 0 sits within 2x of a naive
// baseline that the shifted logits wreck too, but its LSE = -inf.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/gpu/gpu_test_support.hpp"

namespace numprobe::gpu::testing {
namespace {

struct fault_case {
  std::string fault;
  attention_case c;
  bool scalar = false;
};

attention_case make(std::int64_t s, input_dist dist, mask_kind mask = mask_kind::m_none,
                    std::int64_t t = 0, std::int64_t window = 0) {
  attention_case c;
  c.seq = s;
  c.queries = t;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 128;
  c.dist = dist;
  c.mask = mask;
  c.window = window;
  c.seed = 5;
  return c;
}

std::vector<fault_case> cases() {
  std::vector<fault_case> out;
  for (bool scalar : {false, true}) {
    // The max rises tile after tile: every missed or stale rescale shows.
    out.push_back({"skip-rescale", make(1024, input_dist::m_rescale_stress), scalar});
    out.push_back({"stale-max", make(1024, input_dist::m_rescale_stress), scalar});
    // Near-uniform attention over long rows: a bf16 running sum stops growing.
    out.push_back({"rowsum-bf16", make(8192, input_dist::m_diffuse), scalar});
    out.push_back({"acc-bf16", make(8192, input_dist::m_diffuse), scalar});
    // T != S: the top-left causal mask shows only there.
    out.push_back({"mask-top-left", make(1000, input_dist::m_normal, mask_kind::m_causal, 100), scalar});
    // Windowed rows meet key tiles they see nothing of before their first valid key; T > S
    // leaves whole rows without a key.
    out.push_back({"no-empty-guard", make(1000, input_dist::m_normal, mask_kind::m_window, 0, 40), scalar});
    out.push_back({"no-empty-guard", make(100, input_dist::m_normal, mask_kind::m_causal, 300), scalar});
    // A partial last key tile (S = k*64 + 63).
    out.push_back({"drop-tail-tile", make(127, input_dist::m_normal), scalar});
    // Logits far below -1e4: a finite sentinel running max swallows every row.
    out.push_back({"finite-sentinel", make(256, input_dist::m_shifted), scalar});
  }
  return out;
}

void PrintTo(const fault_case& c, std::ostream* os) { *os << c.fault << " on " << c.c.id(); }

class gpu_fault : public ::testing::TestWithParam<fault_case> {};

TEST_P(gpu_fault, detected_where_clean_kernel_passes) {
  NUMPROBE_REQUIRE_GPU();
  const fault_case& fc = GetParam();
  const auto tile = fc.scalar ? std::optional<tile_shape>(tile_shape{64, 64}) : std::nullopt;
  auto clean = gpu_provider({}, tile);
  auto faulty = gpu_provider({fc.fault}, tile);
  const accuracy a = measure(*clean, fc.c);
  const accuracy b = measure(*faulty, fc.c);
  const std::string what = fmt::format(
      "{}: clean rel_rms {:.3e} (ratio {:.2f}, nan {}), {} rel_rms {:.3e} (ratio {:.2f}, nan {}, "
      "masked rows bad {}), lse err {:.3e}",
      fc.c.id(), a.kernel, a.ratio(), a.nan, faulty->name(), b.kernel, b.ratio(), b.nan,
      b.masked_rows_bad, b.lse_max_abs);
  EXPECT_TRUE(a.within_bound()) << what;
  EXPECT_FALSE(b.within_bound()) << what;
  RecordProperty("faulty_ratio_to_naive", fmt::format("{:.4g}", b.ratio()));
}

INSTANTIATE_TEST_SUITE_P(faults, gpu_fault, ::testing::ValuesIn(cases()), [](const auto& info) {
  return sanitize((info.param.scalar ? "scalar_" : "") + info.param.fault + "_" + info.param.c.id());
});

}  // namespace
}  // namespace numprobe::gpu::testing
