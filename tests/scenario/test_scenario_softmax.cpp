// The softmax check runner: a single case and a sweep across chunk boundaries, the implicit
// non-finite gate, worst-point gates, and parse-time rejection of unknown metrics.
#include <algorithm>
#include <gtest/gtest.h>

#include "numprobe/base/error.hpp"
#include "src/scenario/run_scenario.hpp"

namespace sc = numprobe::scenario;
using numprobe::result::status;

namespace {

// Rows of 1000..5000 entries with 1024-entry chunks: the sweep's tile points are k*C-1, k*C,
// k*C+1, so it crosses every chunk boundary in the range.
const char* k_softmax_text = R"(
[defaults]
seed = 5
rows = 2
chunk = 1024

[[check]]
name = "sweep-healthy"
probe = "softmax"
backend = "emu"
vocab = "1000..5000"
bounds = ["kl_mean<=1e-3", "top1>=0.5"]

[[check]]
name = "one-case"
probe = "softmax"
backend = "emu"
vocab = 3000
bound = "rel_rms<=1"

[[check]]
name = "first-chunk-no-guard"
probe = "softmax"
backend = "emu"
vocab = "1000..5000"
mask = "first-chunk"
inject = "no-empty-guard"
)";

const numprobe::result::metric* metric(const numprobe::result::check_result& c, const std::string& n) {
  return c.find_metric(n);
}

}  // namespace

TEST(softmax_runner, sweep_single_case_and_fault) {
  const auto s = sc::parse_scenario(k_softmax_text, "t.toml");
  const auto r = sc::run_scenario(s, {});
  ASSERT_EQ(r.checks.size(), 3u);

  const auto& sw = r.checks[0];
  ASSERT_EQ(sw.outcome, status::m_pass) << sw.message;
  ASSERT_NE(metric(sw, "points"), nullptr);
  const auto& pts = sw.details.at("points");
  EXPECT_EQ(static_cast<std::size_t>(metric(sw, "points")->value), pts.size());
  EXPECT_GE(pts.size(), 9u);  // 1023,1024,1025, ..., 4095,4096,4097 at least
  // The kl_mean gate reports the worst point: its measured value is the sweep's maximum.
  double worst = 0;
  for (const auto& p : pts) worst = std::max(worst, p.at("kernel").at("kl_mean").get<double>());
  const auto g = std::find_if(sw.gates.begin(), sw.gates.end(), [](const auto& x) { return x.metric == "kl_mean"; });
  ASSERT_NE(g, sw.gates.end());
  EXPECT_EQ(g->measured, worst);
  EXPECT_TRUE(g->held);
  ASSERT_EQ(sw.curves.size(), 1u);
  EXPECT_FALSE(sw.curves[0].tile_boundaries.empty());

  EXPECT_EQ(r.checks[1].outcome, status::m_pass) << r.checks[1].message;
  EXPECT_NE(metric(r.checks[1], "rel_rms"), nullptr);
  EXPECT_NE(r.checks[1].case_id.find("V=3000"), std::string::npos) << r.checks[1].case_id;

  // A fully masked first chunk without the empty-chunk guard gives exp(-inf - -inf) = NaN: the
  // implicit nan_points gate must fail the check although it names no bound.
  const auto& f = r.checks[2];
  EXPECT_EQ(f.outcome, status::m_fail) << f.message;
  ASSERT_NE(metric(f, "nan_points"), nullptr);
  EXPECT_GT(metric(f, "nan_points")->value, 0);
  EXPECT_EQ(r.exit_code(), 1);
}

TEST(softmax_runner, unknown_metric_and_bad_parameters_are_input_errors) {
  try {
    (void)sc::parse_scenario("[[check]]\nname='a'\nprobe='softmax'\nbound='sqnr_db>=3'\n", "m.toml");
    FAIL() << "an attention/quant-only metric was accepted for softmax";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("sqnr_db"), std::string::npos) << e.what();
  }
  const auto s = sc::parse_scenario("[[check]]\nname='b'\nprobe='softmax'\nvocab='900..100'\n", "m.toml");
  const auto r = sc::run_scenario(s, {});
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].outcome, status::m_error);
  EXPECT_EQ(r.checks[0].error_code, 2);
}
