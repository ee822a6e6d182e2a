// Tile inference (issue 14) on emulated kernels that hide their tile (`emu:opaque`): a kernel
// with a tail-tile fault or a rescale fault must give its true key tile with confidence; a
// healthy kernel, or one whose fault leaves no tile signature, gives its true tile or "unknown",
// never a wrong tile. The true tile is the one the emulator was built with (--tile), not
// anything the inference computed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fmt/format.h>

#include "probes/tiles/tile_inference.hpp"

using namespace numprobe;

namespace {

struct inference_case {
  const char* name;
  std::int64_t tq, tk;
  std::vector<std::string> faults;
  input_dist dist;       // the case under test's family (inference designs its own inputs)
  bool must_know;        // a fault with a tile signature: the true k is required
};

probes::tile_inference infer(const inference_case& ic, formats::format_id dtype = formats::format_id::m_bf16) {
  provider_options po;
  po.backend = "emu:opaque";
  po.tile = tile_shape{ic.tq, ic.tk};
  po.faults = ic.faults;
  auto prov = make_attention_provider(po);
  EXPECT_FALSE(prov->tiles().known()) << "emu:opaque must hide its tile";
  attention_case base;
  base.head_dim = 64;
  base.dtype = dtype;
  base.dist = ic.dist;
  base.seed = 5;
  return probes::infer_tile(*prov, base);
}

class tile_inference_emu : public ::testing::TestWithParam<inference_case> {};

TEST_P(tile_inference_emu, true_key_tile_or_unknown) {
  const auto& ic = GetParam();
  const auto r = infer(ic);
  SCOPED_TRACE(probes::tile_text(r));
  if (std::getenv("TILE_INFERENCE_VERBOSE")) fmt::print("{}: {}\n", ic.name, probes::tile_text(r));
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.q, 0) << "the query tile is not observable and must not be guessed";
  if (r.known()) {
    EXPECT_EQ(r.k, ic.tk) << "a wrong tile";
    EXPECT_TRUE(r.confidence == "high" || r.confidence == "medium");
  } else {
    EXPECT_EQ(r.confidence, "unknown");
  }
  if (ic.must_know) {
    EXPECT_EQ(r.k, ic.tk);
    EXPECT_TRUE(r.confidence == "high" || r.confidence == "medium");
  }
  EXPECT_FALSE(r.evidence.empty());
}

const std::vector<std::string> k_tail{"drop-tail-tile"};
const std::vector<std::string> k_rescale{"skip-rescale"};
constexpr auto k_normal = input_dist::m_normal;
constexpr auto k_stress = input_dist::m_rescale_stress;

INSTANTIATE_TEST_SUITE_P(
    tiles, tile_inference_emu,
    ::testing::Values(
        inference_case{"tail_96x48", 96, 48, k_tail, k_normal, true},
        inference_case{"tail_80x64", 80, 64, k_tail, k_normal, true},
        inference_case{"tail_128x128", 128, 128, k_tail, k_normal, true},
        inference_case{"tail_64x64", 64, 64, k_tail, k_normal, true},
        inference_case{"tail_16x16", 16, 16, k_tail, k_normal, true},
        inference_case{"tail_64x96", 64, 96, k_tail, k_normal, true},
        inference_case{"tail_64x112", 64, 112, k_tail, k_normal, true},
        inference_case{"tail_64x192", 64, 192, k_tail, k_normal, true},
        inference_case{"rescale_96x48", 96, 48, k_rescale, k_stress, true},
        inference_case{"rescale_80x64", 80, 64, k_rescale, k_stress, true},
        inference_case{"rescale_128x128", 128, 128, k_rescale, k_stress, true},
        inference_case{"rescale_64x64", 64, 64, k_rescale, k_stress, true},
        inference_case{"rescale_16x16", 16, 16, k_rescale, k_stress, true},
        inference_case{"rescale_64x80", 64, 80, k_rescale, k_stress, true},
        inference_case{"healthy_96x48", 96, 48, {}, k_normal, false},
        inference_case{"healthy_80x64", 80, 64, {}, k_normal, false},
        inference_case{"healthy_128x128", 128, 128, {}, k_normal, false},
        inference_case{"healthy_64x64", 64, 64, {}, k_normal, false},
        inference_case{"healthy_16x16", 16, 16, {}, k_normal, false},
        inference_case{"stale_max_96x48", 96, 48, {"stale-max"}, k_stress, false},
        inference_case{"rowsum_bf16_80x64", 80, 64, {"rowsum-bf16"}, k_normal, false},
        inference_case{"acc_bf16_96x48", 96, 48, {"acc-bf16"}, k_normal, false},
        inference_case{"sentinel_64x64", 64, 64, {"finite-sentinel"}, k_normal, false},
        inference_case{"no_guard_96x48", 96, 48, {"no-empty-guard"}, k_normal, false},
        inference_case{"top_left_80x64", 80, 64, {"mask-top-left"}, k_normal, false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace

// Issue 14: a kernel with key tile 96 that skips a partial last key tile, opaque. bisect used to
// read its failures against B=16 and call it "rescale or merge frame"; with the inferred tile
// the boundary step follows B=96 and the class is NUMERICS.md's "paged or tail tile".
#include "probes/bisect/bisect.hpp"

TEST(bisect_opaque, tail_tile_96_is_a_tail_tile) {
  probes::bisect_options o;
  o.base.heads = 2;
  o.base.kv_heads = 1;
  o.base.head_dim = 32;
  o.base.seed = 11;
  o.seq_lo = 32;
  o.seq_hi = 2048;
  o.provider.backend = "emu:opaque";
  o.provider.tile = tile_shape{64, 96};
  o.provider.faults = {"drop-tail-tile"};
  o.probe.sampling.max_rows = 24;
  o.probe.end_to_end = false;
  o.probe.worst = 0;
  const auto r = probes::run_bisect(o);
  SCOPED_TRACE(probes::to_json(r).dump(1));
  EXPECT_EQ(r.inferred_tile.k, 96);
  EXPECT_EQ(r.length.tile, 96);
  EXPECT_EQ(r.length.tile_source, "inferred");
  EXPECT_TRUE(r.length.tile_aligned);
  EXPECT_EQ(r.classification, "paged or tail tile");
  const auto j = probes::to_json(r, false);
  EXPECT_EQ(j.at("inferred_tile").at("k"), 96);
}

// Defaults on opaque kernels (issue 14): `--points tile` never refuses an unknown tile.
#include "numprobe/base/error.hpp"
#include "probes/attention/drift_probe.hpp"

TEST(common_tile_lengths, cross_every_common_tile_within_the_range) {
  const auto v = probes::common_tile_lengths(128, 2048);
  EXPECT_LE(v.size(), 96u);
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
  EXPECT_EQ(std::adjacent_find(v.begin(), v.end()), v.end());
  for (auto s : v) {
    EXPECT_GE(s, 128);
    EXPECT_LE(s, 2048);
  }
  auto has = [&](std::int64_t s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  for (std::int64_t b : {16, 32, 48, 64, 80, 96, 112, 128, 192, 256}) {
    int straddles = 0;  // k with k*B-1, k*B and k*B+1 all present
    for (std::int64_t k = 1; k * b < 2048; ++k) straddles += has(k * b - 1) && has(k * b) && has(k * b + 1);
    EXPECT_GE(straddles, 2) << "B=" << b;
  }
}

TEST(drift_lengths, unknown_tile_gives_dense_common_lengths_and_lists_stay_in_range) {
  EXPECT_EQ(probes::drift_lengths("tile", 128, 2048, 0), probes::common_tile_lengths(128, 2048));
  try {
    (void)probes::drift_lengths("100,1000", 128, 512, 64);
    ADD_FAILURE() << "lengths outside --seq accepted";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input);
    EXPECT_EQ(e.place(), "--points");
  }
}

TEST(drift_opaque, tile_points_follow_the_inferred_tile) {
  provider_options po;
  po.backend = "emu:opaque";
  po.tile = tile_shape{64, 96};
  po.faults = {"drop-tail-tile"};
  auto prov = make_attention_provider(po);
  probes::drift_options o;
  o.base.heads = 2;
  o.base.kv_heads = 1;
  o.base.head_dim = 32;
  o.seq_lo = 128;
  o.seq_hi = 1024;
  o.probe.sampling.max_rows = 16;
  o.probe.end_to_end = false;
  o.bounds = {parse_bound("ratio_to_naive<=2")};
  const auto r = probes::run_drift(*prov, o);
  EXPECT_EQ(r.inferred_tile.k, 96) << probes::tile_text(r.inferred_tile);
  std::vector<std::int64_t> seqs;
  for (const auto& p : r.points) seqs.push_back(p.seq);
  EXPECT_EQ(seqs, probes::drift_lengths("tile", 128, 1024, 96));
  EXPECT_EQ(probes::to_json(r).at("inferred_tile").at("k"), 96);
  EXPECT_NE(r.tile_pattern, "unknown-tile");
}
