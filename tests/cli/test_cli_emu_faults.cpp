// End to end (the real binary): each issue-14 fault makes `numprobe attention --backend emu`
// exit 1 on a case that exercises it, and the same command without the fault exits 0. The bound
// is FlashAttention's healthy-kernel criterion, rel RMS within 2x of the naive baseline; NaN in
// the output is a finding of its own (exit 1).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/run_command.hpp"

using numprobe::testing::run_numprobe;
using json = nlohmann::json;

namespace {

struct cli_fault_case {
  const char* fault;
  const char* flags;  // a case that exercises the fault's mechanism
};

// gqa-mod: group 4 with 2 distinct KV heads; index-wrap: 2 queries over 40960 keys (a fifth of
// them past 2^15); wave-width: rows of 48 keys in a 64-key tile; empty-split-nan: 8 causal
// decode queries over 129 keys in splits of 64, whose last split [128, 129) is empty for 7 rows.
const cli_fault_case k_cases[] = {
    {"gqa-mod", "--seq 200 --queries 3 --heads 8 --kv-heads 2 --head-dim 32 --mask causal"},
    {"index-wrap", "--seq 40960 --queries 2 --heads 2 --kv-heads 1 --head-dim 32 --mask none --rows all"},
    {"wave-width", "--seq 48 --queries 4 --heads 2 --kv-heads 1 --head-dim 32 --mask none"},
    {"empty-split-nan",
     "--decode --split-size 64 --seq 129 --queries 8 --heads 2 --kv-heads 1 --head-dim 32 --mask causal"},
};

class cli_emu_fault : public ::testing::TestWithParam<cli_fault_case> {};

TEST_P(cli_emu_fault, exits_1_with_the_fault_and_0_without) {
  const cli_fault_case& fc = GetParam();
  const std::string base = std::string("attention --backend emu ") + fc.flags +
                           " --no-e2e --bound 'ratio_to_naive<=2' --json -";
  const auto clean = run_numprobe(base);
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  const auto faulty = run_numprobe(base + " --inject " + fc.fault);
  ASSERT_EQ(faulty.exit_code, 1) << faulty.err;
  const auto j = json::parse(faulty.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << faulty.out.substr(0, 400);
  EXPECT_EQ(j["pass"], false);
  // The provider names the fault it ran with.
  EXPECT_NE(faulty.out.find(fc.fault), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(issue14, cli_emu_fault, ::testing::ValuesIn(k_cases), [](const auto& info) {
  std::string n = info.param.fault;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

TEST(cli_emu_fault_flags, decode_only_fault_without_decode_exits_2) {
  const auto r = run_numprobe("attention --backend emu --seq 64 --heads 2 --kv-heads 1 --head-dim 32 "
                              "--inject empty-split-nan");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--decode"), std::string::npos) << r.err;
}

TEST(cli_emu_fault_flags, wave_width_metadata_records_the_wavefront) {
  const auto r = run_numprobe("attention --backend emu --seq 16 --heads 2 --kv-heads 1 --head-dim 32 "
                              "--inject wave-width --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;  // 16 keys fit in lanes 0..31: exact
  const auto j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 400);
  EXPECT_EQ(j["backend"]["metadata"]["wavefront"]["width"], 64) << j["backend"].dump();
  EXPECT_EQ(j["backend"]["metadata"]["wavefront"]["reduction_width"], 32);
}

}  // namespace
