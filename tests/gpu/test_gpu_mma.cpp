// The tensor-core probe on the device (issue 31, item 2): each mma.sync path's findings make a
// model (model_from_findings), and that model must reproduce the device's output bit for bit on
// random and adversarial dot products (mma_random_vectors: four families). The counts go to the
// test's XML properties and stdout for the closing note; the published model of each path is
// compared too, and on sm_90 the Hopper entries must agree as well (the fp8 ones were measured on
// an H200: the first device they did not come from tests them); other published models are
// reported without a requirement (where they differ is a finding about the device).
// Skips without a device.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "gpu_test_support.hpp"
#include "probes/mma/mma_run.hpp"

namespace numprobe::probes {
namespace {

TEST(gpu_mma, measured_models_reproduce_the_device_bit_for_bit) {
  if (!gpu::testing::have_device()) GTEST_SKIP() << "no CUDA device";
  mma_run_options o;
  o.agree = 8192;
  o.seed = 2026;
  const mma_run_result r = run_mma(o);
  ASSERT_FALSE(r.paths.empty());
  for (const auto& a : r.agreement) {
    const std::string line = fmt::format("{} vs {}: {}/{} equal ({})", a.path, a.model, a.equal, a.vectors, a.model_text);
    std::printf("%s\n", line.c_str());
    RecordProperty(a.path + " " + a.model, fmt::format("{}/{}", a.equal, a.vectors));
    if (a.model == "measured") {
      EXPECT_EQ(a.equal, a.vectors) << line;
    }
    // The Hopper mma.sync entries (f16/bf16/tf32 from MMA-Sim, fp8 measured on an H200) on sm_90.
    if (a.model.rfind("h200-mma-", 0) == 0 && r.source.find("(sm_90)") != std::string::npos) {
      EXPECT_EQ(a.equal, a.vectors) << line;
    }
  }
  for (const auto& n : r.no_model) std::printf("no measured model: %s\n", n.c_str());
  // f16, bf16 and tf32 are determined on every device the probe runs (sm_80+): their models exist.
  std::size_t measured = 0;
  for (const auto& a : r.agreement) measured += a.model == "measured" && a.path.find("e4m3") == std::string::npos &&
                                                a.path.find("e5m2") == std::string::npos;
  EXPECT_EQ(measured, 3u);
}

}  // namespace
}  // namespace numprobe::probes
