// bisect on serving numerics (issue 9): the fp8 quantization points are separated and the one
// that breaks the bound is named, for every fp8 fault (fnuz variants included) and for a bad
// configuration; a healthy fp8 kernel gets "no failure". Split-KV decode faults are named by
// the single-split check and the split/page sweeps. Expected points and classes come from the
// fault definitions (NUMERICS.md), not from bisect's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "probes/bisect/bisect.hpp"

using namespace numprobe;

namespace {

std::string describe(const probes::bisect_result& r) {
  std::string s = "classification '" + r.classification + "', fp8 verdict '" + r.fp8.verdict + "', culprit:";
  for (const auto& c : r.fp8.culprit) s += " " + c;
  s += ", decode '" + r.decode.merge_fault + "'\n" + probes::to_json(r).dump(1);
  return s;
}

struct fp8_case {
  const char* name;
  input_dist dist;
  formats::format_id dtype;
  double scale;                             // softmax scale (0: 1/sqrt(D))
  std::map<std::string, std::string> knobs;
  std::vector<std::string> faults;
  const char* bound;                        // "" : the default ratio_to_naive <= 2
  std::int64_t lo, hi;
  std::vector<std::string> expect_points;   // empty: no failure
  const char* expect_class;
};

probes::bisect_options fp8_options(const fp8_case& b) {
  probes::bisect_options o;
  o.base.heads = 2;
  o.base.kv_heads = 1;
  o.base.head_dim = 64;
  o.base.dtype = b.dtype;
  o.base.dist = b.dist;
  o.base.mask = mask_kind::m_none;
  o.base.scale = b.scale;
  o.base.seed = 7;
  o.seq_lo = b.lo;
  o.seq_hi = b.hi;
  o.provider.backend = "emu";
  o.provider.tile = tile_shape{64, 64};
  o.provider.knobs = b.knobs;
  o.provider.faults = b.faults;
  if (*b.bound) o.bounds.push_back(parse_bound(b.bound));
  o.probe.sampling.max_rows = 16;
  o.probe.end_to_end = false;
  o.probe.worst = 0;
  return o;
}

class bisect_fp8 : public ::testing::TestWithParam<fp8_case> {};

TEST_P(bisect_fp8, names_the_quantization_point) {
  const auto& b = GetParam();
  const auto r = probes::run_bisect(fp8_options(b));
  if (b.expect_points.empty()) {
    EXPECT_FALSE(r.failure_found) << describe(r);
    EXPECT_EQ(r.classification, "no failure");
    EXPECT_FALSE(r.fp8.ran);
    EXPECT_TRUE(r.fp8.culprit.empty());
    return;
  }
  ASSERT_TRUE(r.failure_found) << describe(r);
  ASSERT_TRUE(r.fp8.ran) << describe(r);
  EXPECT_EQ(r.fp8.verdict, "one") << describe(r);
  EXPECT_EQ(r.fp8.culprit, b.expect_points) << describe(r);
  // Each restoration of the culprit passes; every other single restoration still fails.
  for (const auto& x : r.fp8.restorations) {
    if (x.points.size() != 1) continue;
    const bool is_culprit = x.points == b.expect_points;
    EXPECT_EQ(x.removes, is_culprit) << x.points.front() << "\n" << describe(r);
  }
  EXPECT_EQ(r.classification, b.expect_class) << describe(r);
  const auto j = probes::to_json(r, false);
  EXPECT_EQ(j["culprit"]["kind"], "fp8_point");
  EXPECT_EQ(j["culprit"]["points"], nlohmann::json(b.expect_points));
  EXPECT_EQ(j["fp8_points"]["verdict"], "one");
}

using F = formats::format_id;
using knobs = std::map<std::string, std::string>;
const knobs k_all_points{{"kv-format", "e4m3fn"}, {"kv-scale", "head"}, {"p-format", "e4m3fn"},
                         {"p-prescale", "256"}, {"acc-promote", "4"}};
const knobs k_all_points_fnuz{{"kv-format", "e4m3fnuz"}, {"kv-scale", "head"}, {"p-format", "e4m3fnuz"},
                              {"p-prescale", "128"}, {"acc-promote", "4"}};

// Bounds and their bases:
//  - rel_rms<=0.0625: the e4m3 unit roundoff 2^-4 (e4m3fn and e4m3fnuz alike). A healthy fp8 KV
//    cache keeps the output's rel RMS under it (tests/kernels/test_fp8_emu.cpp measures this).
//  - rel_rms<=4.9e-4 (f32 inputs, accumulator cases): 4 x 2^-13. The modelled fp8 MMA
//    accumulator keeps 13 fraction bits and truncates; promoted every 4 tiles the relative
//    error stays a few 2^-13, while without promotion it compounds over all key tiles.
//  - the default ratio_to_naive<=2 for P (FlashAttention's criterion): pre-scaled e4m3 P stays
//    within it at S <= 32K for N(0, 2^2) logits (scale 0.25, D = 64), where a third of the
//    numerator mass sits below e4m3's smallest normal without the pre-scale.
const fp8_case k_fp8_cases[] = {
    {"healthy_all_points", input_dist::m_normal, F::m_bf16, 0.0, k_all_points, {}, "rel_rms<=0.0625", 64, 2048,
     {}, "no failure"},
    {"healthy_all_points_fnuz", input_dist::m_normal, F::m_bf16, 0.0, k_all_points_fnuz, {}, "rel_rms<=0.0625", 64,
     2048, {}, "no failure"},
    {"kv_scale_ignored", input_dist::m_normal, F::m_bf16, 0.0, k_all_points, {"kv-scale-ignored"},
     "rel_rms<=0.0625", 64, 2048, {"kv"}, "fp8 scaling"},
    {"kv_scale_ignored_fnuz", input_dist::m_normal, F::m_bf16, 0.0, k_all_points_fnuz, {"kv-scale-ignored"},
     "rel_rms<=0.0625", 64, 2048, {"kv"}, "fp8 scaling"},
    {"kv_scale_ignored_e5m2", input_dist::m_normal, F::m_bf16, 0.0, {{"kv-format", "e5m2"}, {"kv-scale", "channel"}},
     {"kv-scale-ignored"}, "rel_rms<=0.125", 64, 2048, {"kv"}, "fp8 scaling"},  // e5m2: u = 2^-3
    // A bad configuration, no fault: keys with a large, growing channel (rescale-stress) in an
    // e4m3 cache with one scale per tensor.
    {"bad_config_tensor_scale", input_dist::m_rescale_stress, F::m_bf16, 0.0,
     {{"kv-format", "e4m3fn"}, {"kv-scale", "tensor"}}, {}, "rel_rms<=0.0625", 64, 2048, {"kv"}, "fp8 scaling"},
    {"p_no_prescale", input_dist::m_normal, F::m_bf16, 0.25, {{"p-format", "e4m3fn"}, {"p-prescale", "256"}},
     {"p-no-prescale"}, "", 4096, 32768, {"p"}, "fp8 scaling"},
    {"acc_no_promotion", input_dist::m_diffuse, F::m_f32, 0.0, {{"acc-promote", "4"}}, {"acc-no-promotion"},
     "rel_rms<=4.9e-4", 256, 8192, {"acc"}, "low-precision accumulation"},
};

INSTANTIATE_TEST_SUITE_P(emu, bisect_fp8, ::testing::ValuesIn(k_fp8_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(bisect_fp8, restoring_a_point_removes_its_knobs_and_fault) {
  provider_options po;
  po.knobs = k_all_points;
  po.faults = {"kv-scale-ignored", "p-no-prescale", "acc-no-promotion", "skip-rescale"};
  EXPECT_EQ(probes::active_fp8_points(po), (std::vector<std::string>{"kv", "p", "acc"}));
  const auto kv = probes::restore_fp8_points(po, {"kv"});
  EXPECT_EQ(kv.knobs.count("kv-format") + kv.knobs.count("kv-scale"), 0u);
  EXPECT_EQ(kv.faults, (std::vector<std::string>{"p-no-prescale", "acc-no-promotion", "skip-rescale"}));
  const auto acc = probes::restore_fp8_points(po, {"acc", "p"});
  EXPECT_EQ(acc.knobs.at("acc-promote"), "1");
  EXPECT_EQ(acc.knobs.count("p-format"), 0u);
  EXPECT_EQ(acc.faults, (std::vector<std::string>{"kv-scale-ignored", "skip-rescale"}));
  po.backend = "cuda";  // knobs of another backend are not the emulator's points
  EXPECT_TRUE(probes::active_fp8_points(po).empty());
}

// --- split-KV decode ------------------------------------------------------------------------

struct decode_case {
  const char* name;
  std::vector<std::string> faults;
  std::int64_t splits;
  const char* expect_fault;  // "" : no failure
  const char* expect_class;
};

probes::bisect_options decode_options(const decode_case& b) {
  probes::bisect_options o;
  o.base.queries = 4;
  o.base.heads = 4;
  o.base.kv_heads = 2;
  o.base.head_dim = 64;
  o.base.dtype = F::m_bf16;
  o.base.dist = input_dist::m_normal;
  o.base.mask = mask_kind::m_causal;  // bottom-right: at S < T the first rows see no key
  o.base.seed = 5;
  o.seq_lo = 2;
  o.seq_hi = 4096;
  o.provider.backend = "emu";
  o.provider.knobs = {{"decode", "1"}, {"splits", std::to_string(b.splits)}, {"page-size", "16"}};
  o.provider.faults = b.faults;
  o.probe.sampling.max_rows = 16;
  o.probe.end_to_end = false;
  o.probe.worst = 0;
  return o;
}

class bisect_decode : public ::testing::TestWithParam<decode_case> {};

TEST_P(bisect_decode, names_the_merge_fault) {
  const auto& b = GetParam();
  const auto r = probes::run_bisect(decode_options(b));
  if (!*b.expect_fault) {
    EXPECT_FALSE(r.failure_found) << describe(r);
    EXPECT_EQ(r.classification, "no failure");
    return;
  }
  ASSERT_TRUE(r.failure_found) << describe(r);
  ASSERT_TRUE(r.decode.ran) << describe(r);
  EXPECT_EQ(r.decode.merge_fault, b.expect_fault) << describe(r);
  EXPECT_EQ(r.classification, b.expect_class) << describe(r);
  EXPECT_EQ(r.decode.split_sweep.size(), 5u);
  EXPECT_EQ(r.decode.page_sweep.size(), 4u);
  const auto j = probes::to_json(r, false);
  EXPECT_EQ(j["culprit"]["kind"], "decode_merge");
  EXPECT_EQ(j["culprit"]["fault"], b.expect_fault);
  EXPECT_EQ(j["decode"]["merge_fault"], b.expect_fault);
  const std::string fault = b.expect_fault;
  if (fault == "lse-base2-merge") {
    // One split has no merge: the single-split check removes the failure.
    EXPECT_TRUE(r.decode.single_split.ran && r.decode.single_split.removes) << describe(r);
    EXPECT_TRUE(r.decode.split_dependent);
    EXPECT_FALSE(r.decode.split_sweep.front().outcome.failed);
  }
  if (fault == "split-tail-drop") {
    // The tail is dropped with any split count; lengths k*64 pass, k*64 +- 1 fail.
    EXPECT_FALSE(r.decode.single_split.removes) << describe(r);
    ASSERT_EQ(r.decode.page_edges.size(), 3u);
    EXPECT_EQ(r.decode.page_edges[1].value % 64, 0);
    EXPECT_TRUE(r.decode.page_edges[0].outcome.failed && r.decode.page_edges[2].outcome.failed);
    EXPECT_FALSE(r.decode.page_edges[1].outcome.failed);
  }
  if (fault == "merge-nan-empty") {
    EXPECT_TRUE(r.decode.all_empty_nan);
    EXPECT_GT(r.families.masked_rows.nan, 0);
    EXPECT_EQ(r.families.normal.nan, 0);
  }
}

const decode_case k_decode_cases[] = {
    // 8 splits over S < 8 * 64 keys: the later splits are empty at every short length.
    {"healthy_empty_splits", {}, 8, "", "no failure"},
    {"healthy_one_split", {}, 1, "", "no failure"},
    {"lse_base2_merge", {"lse-base2-merge"}, 4, "lse-base2-merge", "rescale or merge frame"},
    {"split_tail_drop", {"split-tail-drop"}, 4, "split-tail-drop", "paged or tail tile"},
    {"merge_nan_empty", {"merge-nan-empty"}, 8, "merge-nan-empty", "empty or masked split"},
};

INSTANTIATE_TEST_SUITE_P(emu, bisect_decode, ::testing::ValuesIn(k_decode_cases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace

namespace {

// Two faults at once, an fp8 one and a rescale one: restoring K/V cuts the error by orders of
// magnitude but leaves the failure ("partial"), and the later stages, run with K/V restored,
// find the rescale fault. Both findings, or an honest "ambiguous"; never one confident class.
TEST(bisect_fp8_mixed, fp8_and_rescale_faults_give_both_findings) {
  fp8_case b{"mixed", input_dist::m_rescale_stress, F::m_bf16, 0.0, {{"kv-format", "e4m3fn"}, {"kv-scale", "token"}},
             {"kv-scale-ignored", "skip-rescale"}, "rel_rms<=0.0625", 64, 2048, {"kv"}, ""};
  const auto r = probes::run_bisect(fp8_options(b));
  ASSERT_TRUE(r.failure_found) << describe(r);
  EXPECT_EQ(r.fp8.verdict, "partial") << describe(r);
  EXPECT_EQ(r.fp8.culprit, (std::vector<std::string>{"kv"})) << describe(r);
  EXPECT_TRUE(r.fp8.rest_restored);
  const std::set<std::string> got(r.candidates.begin(), r.candidates.end());
  const std::set<std::string> both{"rescale or merge frame", "fp8 scaling"};
  for (const auto& c : got) EXPECT_TRUE(both.count(c)) << "unexpected class " << c << describe(r);
  EXPECT_TRUE(got == both || r.classification == "ambiguous") << describe(r);
  EXPECT_NE(r.classification, "fp8 scaling");  // not one confident class for two faults
}

}  // namespace

namespace {

// The same decode command twice gives the same trace (timings aside).
TEST(bisect_decode_determinism, same_trace_twice) {
  const decode_case b{"lse_base2_merge", {"lse-base2-merge"}, 4, "lse-base2-merge", "rescale or merge frame"};
  const auto a = probes::to_json(probes::run_bisect(decode_options(b)), false);
  const auto c = probes::to_json(probes::run_bisect(decode_options(b)), false);
  EXPECT_EQ(a.dump(), c.dump());
}

}  // namespace
