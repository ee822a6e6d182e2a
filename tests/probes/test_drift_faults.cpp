// Every emulator fault is detected by drift under the input family designed to expose it
// (NUMERICS.md, "Real bug classes"), and the same sweep without the fault is clean.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "numprobe/base/error.hpp"
#include "probes/attention/drift_probe.hpp"

using namespace numprobe;

namespace {

struct fault_case {
  const char* fault;       // "" for the healthy kernel
  input_dist dist;
  mask_kind mask;
  std::int64_t queries;    // 0: T = S
  std::int64_t window;
  const char* expect;      // "grows", "breach", "nan", "tail" (breaches only off tile multiples)
};

std::string test_name(const fault_case& f) {
  std::string s = std::string(*f.fault ? f.fault : "healthy") + "_" +
                  std::string(to_string(f.dist)) + "_" + std::string(to_string(f.mask));
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

probes::drift_result sweep(const fault_case& f, const std::string& points) {
  attention_case c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.dtype = formats::format_id::m_bf16;
  c.dist = f.dist;
  c.mask = f.mask;
  c.queries = f.queries;
  c.window = f.window;
  c.seed = 11;
  provider_options po;
  po.backend = "emu";
  po.tile = tile_shape{32, 32};
  if (*f.fault) po.faults.push_back(f.fault);
  auto prov = make_attention_provider(po);
  probes::drift_options o;
  o.base = c;
  o.seq_lo = 32;
  o.seq_hi = 2048;
  o.points = points;
  o.probe.sampling.max_rows = 24;
  o.probe.end_to_end = false;
  // FlashAttention's acceptance criterion: within 2x of the naive same-precision baseline.
  o.bounds.push_back(parse_bound("ratio_to_naive<=2"));
  return probes::run_drift(*prov, o);
}

class drift_faults : public ::testing::TestWithParam<fault_case> {};

TEST_P(drift_faults, detected_by_drift_under_its_input_family) {
  const auto& f = GetParam();
  const std::string expect = f.expect;
  const auto r = sweep(f, "tile");
  ASSERT_FALSE(r.points.empty());
  if (expect == "clean") {
    EXPECT_EQ(r.growth.verdict, "flat") << "slope " << r.growth.slope;
    EXPECT_TRUE(r.breaches.empty()) << r.breaches.front().bound << " at " << r.breaches.front().seq
                                    << " measured " << r.breaches.front().measured;
    EXPECT_EQ(r.nan_points, 0);
    EXPECT_FALSE(r.gated_breach);
  } else if (expect == "grows") {
    EXPECT_EQ(r.growth.verdict, "grows") << "slope " << r.growth.slope;
    EXPECT_TRUE(r.gated_breach);
  } else if (expect == "breach") {
    EXPECT_FALSE(r.breaches.empty());
    EXPECT_TRUE(r.gated_breach);
  } else if (expect == "nan") {
    EXPECT_GT(r.nan_points, 0);
    EXPECT_TRUE(r.gated_breach);
  } else if (expect == "tail") {
    // A dropped partial tail tile only hurts lengths that are not tile multiples.
    EXPECT_FALSE(r.breaches.empty());
    EXPECT_EQ(r.tile_pattern, "non-multiples");
  }
}

const fault_case k_cases[] = {
    {"", input_dist::m_normal, mask_kind::m_causal, 0, 0, "clean"},
    {"", input_dist::m_rescale_stress, mask_kind::m_causal, 0, 0, "clean"},
    {"", input_dist::m_max_first, mask_kind::m_none, 0, 0, "clean"},
    {"", input_dist::m_diffuse, mask_kind::m_none, 0, 0, "clean"},
    {"", input_dist::m_shifted, mask_kind::m_causal, 0, 0, "clean"},
    {"", input_dist::m_normal, mask_kind::m_window, 0, 48, "clean"},
    {"skip-rescale", input_dist::m_rescale_stress, mask_kind::m_causal, 0, 0, "grows"},
    {"stale-max", input_dist::m_rescale_stress, mask_kind::m_none, 0, 0, "breach"},
    {"rowsum-bf16", input_dist::m_diffuse, mask_kind::m_none, 0, 0, "grows"},
    {"acc-bf16", input_dist::m_diffuse, mask_kind::m_none, 0, 0, "breach"},
    {"mask-top-left", input_dist::m_normal, mask_kind::m_causal, 3, 0, "breach"},
    {"no-empty-guard", input_dist::m_normal, mask_kind::m_window, 0, 48, "nan"},
    {"drop-tail-tile", input_dist::m_normal, mask_kind::m_none, 0, 0, "tail"},
    {"finite-sentinel", input_dist::m_shifted, mask_kind::m_causal, 0, 0, "breach"},
};

INSTANTIATE_TEST_SUITE_P(emu, drift_faults, ::testing::ValuesIn(k_cases),
                         [](const auto& info) { return test_name(info.param); });

TEST(drift_lengths, tile_points_straddle_every_chosen_tile_multiple) {
  const auto v = probes::drift_lengths("tile", 128, 4096, 64);
  ASSERT_FALSE(v.empty());
  for (auto s : v) {
    const auto m = s % 64;
    EXPECT_TRUE(m == 0 || m == 1 || m == 63) << s;
    EXPECT_GE(s, 128);
    EXPECT_LE(s, 4096);
  }
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
}

TEST(drift_lengths, rejects_bad_specs) {
  EXPECT_THROW((void)probes::drift_lengths("log:0", 1, 10, 64), numprobe::error);
  EXPECT_THROW((void)probes::drift_lengths("1,x", 1, 10, 64), numprobe::error);
  EXPECT_THROW((void)probes::drift_lengths("tile", 10, 1, 64), numprobe::error);
  EXPECT_EQ(probes::drift_lengths("5,3,5", 1, 10, 64), (std::vector<std::int64_t>{3, 5}));
}

// Growth verdict on the dimensionless error (issue 14 item 5, issue 15 item 5), over
// 128..4096 on the default 64x64 tile with small heads, as `numprobe drift --dist diffuse`.
probes::drift_result growth_sweep(const std::map<std::string, std::string>& states, input_dist dist,
                                  const std::string& points, std::int64_t lo, std::int64_t hi,
                                  const std::vector<std::string>& bounds = {}) {
  attention_case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 64;
  c.dtype = formats::format_id::m_bf16;
  c.dist = dist;
  c.mask = mask_kind::m_causal;
  c.seed = 7;
  provider_options po;
  po.backend = "emu";
  po.states = states;
  auto prov = make_attention_provider(po);
  probes::drift_options o;
  o.base = c;
  o.seq_lo = lo;
  o.seq_hi = hi;
  o.points = points;
  o.probe.sampling.max_rows = 64;
  o.probe.end_to_end = false;
  for (const auto& b : bounds) o.bounds.push_back(parse_bound(b));
  return probes::run_drift(*prov, o);
}

TEST(drift_growth, l_held_in_bf16_grows_under_diffuse_inputs) {
  const auto r = growth_sweep({{"l", "bf16"}}, input_dist::m_diffuse, "tile", 128, 4096);
  EXPECT_EQ(r.growth.verdict, "grows") << "slope " << r.growth.slope << " ratio slope " << r.growth.ratio.slope;
  EXPECT_EQ(r.growth.error.verdict, "grows");
  EXPECT_EQ(r.growth.ratio.verdict, "grows");
}

TEST(drift_growth, the_healthy_kernel_is_flat_under_diffuse_inputs) {
  const auto r = growth_sweep({}, input_dist::m_diffuse, "tile", 128, 4096,
                              {"growth.slope<=0.25", "growth.ratio_slope<=0.15"});
  EXPECT_EQ(r.growth.verdict, "flat") << "slope " << r.growth.slope << " ratio slope " << r.growth.ratio.slope;
  EXPECT_EQ(r.growth.error.verdict, "flat");
  EXPECT_EQ(r.growth.ratio.verdict, "flat");
  EXPECT_GE(r.growth.ratio.points, 12);
  EXPECT_FALSE(r.gated_breach);
}

TEST(drift_growth, the_ratio_fit_catches_an_accumulator_in_bf16_that_rel_rms_misses) {
  // O accumulated in bf16 under diffuse causal rows: rel_rms falls with the row length on the
  // short causal rows, so its fit stays flat, while the ratio to the naive baseline doubles.
  const auto r = growth_sweep({{"o", "bf16"}}, input_dist::m_diffuse, "tile", 128, 4096);
  EXPECT_EQ(r.growth.error.verdict, "flat") << "slope " << r.growth.slope;
  EXPECT_EQ(r.growth.ratio.verdict, "grows") << "ratio slope " << r.growth.ratio.slope << " +- "
                                             << r.growth.ratio.slope_stderr;
  EXPECT_EQ(r.growth.verdict, "grows");
}

TEST(drift_growth, two_points_are_insufficient_and_fail_growth_bounds) {
  // Issue 15: a two-point fit once printed "slope 0.000 +- 0.000 ... flat" and passed the gate.
  const auto r = growth_sweep({{"l", "bf16"}}, input_dist::m_diffuse, "128,4096", 128, 4096,
                              {"growth.slope<=0.25", "growth.ratio_slope<=0.15"});
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.growth.verdict, "insufficient");
  EXPECT_TRUE(r.gated_breach);
  ASSERT_EQ(r.breaches.size(), 2u);
  for (const auto& b : r.breaches) {
    EXPECT_EQ(b.seq, 0);
    EXPECT_TRUE(std::isnan(b.measured)) << b.bound;
  }
  const auto j = probes::to_json(r);
  EXPECT_EQ(j["growth"]["verdict"], "insufficient");
  EXPECT_EQ(j["growth"]["slope"], "nan");  // schema 2: non-finite numbers are strings (docs/json-schema.md)
  EXPECT_EQ(j["growth"]["ratio_slope"], "nan");
  EXPECT_TRUE(j["growth"]["rule"].is_string());
}

TEST(drift_growth, json_reports_both_slopes_and_the_rule) {
  const auto r = growth_sweep({}, input_dist::m_normal, "tile", 128, 1024);
  const auto j = probes::to_json(r)["growth"];
  for (const char* k : {"slope", "slope_stderr", "ratio_slope", "ratio_slope_stderr", "threshold", "ratio_threshold",
                        "k_stderr", "min_range_growth", "ratio_at_max"})
    EXPECT_TRUE(j[k].is_number()) << k;
  EXPECT_EQ(j["verdict"], "flat");
  EXPECT_EQ(j["ratio_y"], "ratio_to_naive");
  EXPECT_NE(j["rule"].get<std::string>().find("ratio_to_naive"), std::string::npos);
}

}  // namespace
