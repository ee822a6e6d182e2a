// CLI contract of `audit` (issue 14): a verdict per bug class of NUMERICS.md, the JSON fields
// (classes[] of {name, verdict, evidence[], cases[]}, inferred_tile, healthy), the Markdown
// report, and exit codes 0 / 1. Each planted fault must be named, and named alone: the expected
// class is the one NUMERICS.md gives the bug, not what the audit happened to say.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_command.hpp"

using numprobe::testing::run_numprobe;
using json = nlohmann::json;

namespace {

const std::string k_case = "--heads 8 --kv-heads 2 --head-dim 64 --quick ";

json parse_or_fail(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text.substr(0, 400);
  return j;
}

std::set<std::string> failing(const json& j) {
  std::set<std::string> out;
  for (const auto& c : j["classes"])
    if (c["verdict"] == "fail") out.insert(c["name"].get<std::string>());
  return out;
}

struct planted {
  std::string name;    // test name
  std::string flags;   // backend flags that plant the bug
  std::string klass;   // NUMERICS.md's class of the bug
};

std::string test_name(const ::testing::TestParamInfo<planted>& i) { return i.param.name; }
void PrintTo(const planted& p, std::ostream* os) { *os << p.flags << " -> " << p.klass; }

class audit_names_the_class : public ::testing::TestWithParam<planted> {};

TEST_P(audit_names_the_class, alone_and_exits_1) {
  const auto& p = GetParam();
  const auto r = run_numprobe("audit --backend emu " + p.flags + " " + k_case + "--json -");
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out.substr(0, 600);
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(failing(j), std::set<std::string>{p.klass}) << r.out.substr(0, 4000);
  EXPECT_FALSE(j["healthy"].get<bool>());
  for (const auto& c : j["classes"])
    if (c["verdict"] == "fail") {
      EXPECT_FALSE(c["evidence"].empty());
      EXPECT_FALSE(c["cases"].empty());
      for (const auto& id : c["cases"]) EXPECT_EQ(id.get<std::string>().rfind("attention(", 0), 0u) << id;
    }
}

INSTANTIATE_TEST_SUITE_P(
    emu_faults, audit_names_the_class,
    ::testing::Values(
        planted{"skip_rescale", "--inject skip-rescale", "rescale or merge frame"},
        planted{"stale_max", "--inject stale-max", "rescale or merge frame"},
        planted{"rowsum_bf16", "--inject rowsum-bf16", "low-precision accumulation"},
        planted{"acc_bf16", "--inject acc-bf16", "low-precision accumulation"},
        planted{"l_bf16_state", "--state l=bf16", "low-precision accumulation"},
        planted{"mask_top_left", "--inject mask-top-left", "mask geometry"},
        planted{"no_empty_guard", "--inject no-empty-guard", "empty or masked split"},
        planted{"drop_tail_tile", "--inject drop-tail-tile", "paged or tail tile"},
        planted{"drop_tail_tile_96", "--tile 64x96 --inject drop-tail-tile", "paged or tail tile"},
        planted{"finite_sentinel", "--inject finite-sentinel", "finite sentinel"},
        planted{"gqa_mod", "--inject gqa-mod", "GQA mapping"},
        planted{"index_wrap", "--inject index-wrap", "index or dispatch threshold"},
        planted{"wave_width", "--inject wave-width", "wavefront width"},
        planted{"p_fp8_no_prescale", "--p-format e4m3fn", "fp8 scaling"},
        planted{"kv_scale_ignored", "--kv-format e4m3fn --inject kv-scale-ignored", "fp8 scaling"},
        planted{"decode_merge_nan_empty", "--decode --queries 4 --inject merge-nan-empty", "empty or masked split"},
        planted{"decode_empty_split_nan", "--decode --queries 4 --inject empty-split-nan", "empty or masked split"},
        planted{"decode_lse_base2", "--decode --queries 4 --inject lse-base2-merge", "rescale or merge frame"},
        planted{"decode_split_tail_drop", "--decode --queries 4 --inject split-tail-drop", "paged or tail tile"}),
    test_name);

TEST(cli_audit, healthy_emulator_passes_every_class_with_the_contract_fields) {
  const std::string md = ::testing::TempDir() + "audit_healthy.md";
  const auto r = run_numprobe("audit --backend emu " + k_case + "--md " + md + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["command"], "audit");
  EXPECT_TRUE(j["healthy"].get<bool>());
  EXPECT_TRUE(failing(j).empty()) << r.out.substr(0, 4000);
  // Every class of NUMERICS.md's table, once.
  const std::set<std::string> want{"empty or masked split", "finite sentinel", "rescale or merge frame",
                                   "low-precision accumulation", "index or dispatch threshold", "mask geometry",
                                   "paged or tail tile", "GQA mapping", "fp8 scaling", "sub-byte formats",
                                   "wavefront width"};
  std::set<std::string> got;
  for (const auto& c : j["classes"]) {
    got.insert(c["name"].get<std::string>());
    const auto v = c["verdict"].get<std::string>();
    EXPECT_TRUE(v == "pass" || v == "fail" || v == "not-applicable") << v;
    EXPECT_TRUE(c["evidence"].is_array());
    EXPECT_TRUE(c["cases"].is_array());
    if (v != "not-applicable") {
      EXPECT_FALSE(c["cases"].empty()) << c.dump();
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(j["classes"].size(), want.size());
  // The kernel's own tile: no inference needed.
  EXPECT_EQ(j["tile"]["k"], 64);
  EXPECT_EQ(j["tile"]["source"], "kernel");
  EXPECT_TRUE(j.contains("inferred_tile"));
  ASSERT_TRUE(j["trace"].is_array());
  std::ifstream in(md);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("| GQA mapping | pass |"), std::string::npos) << ss.str();
}

TEST(cli_audit, opaque_kernel_with_a_96_key_tile_tail_bug_is_inferred_and_named) {
  // emu:opaque hides its tile as an exec kernel does; 96 is no power of two.
  const auto r = run_numprobe("audit --backend emu:opaque --tile 64x96 --inject drop-tail-tile " + k_case + "--json -");
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(failing(j), std::set<std::string>{"paged or tail tile"});
  EXPECT_EQ(j["inferred_tile"]["k"], 96) << j["inferred_tile"].dump();
  EXPECT_EQ(j["tile"]["source"], "inferred");
  EXPECT_EQ(j["tile"]["k"], 96);
}

TEST(cli_audit, opaque_healthy_kernel_passes_with_unknown_or_true_tile) {
  const auto r = run_numprobe("audit --backend emu:opaque --tile 80x48 " + k_case + "--json -");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 3000);
  const auto j = parse_or_fail(r.out);
  EXPECT_TRUE(j["healthy"].get<bool>());
  const auto k = j["inferred_tile"]["k"].get<int>();
  EXPECT_TRUE(k == 0 || k == 48) << "a wrong tile is worse than none: " << j["inferred_tile"].dump();
}

TEST(cli_audit, terminal_report_names_the_failing_class) {
  const auto r = run_numprobe("audit --backend emu --inject gqa-mod " + k_case);
  ASSERT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("[FAIL] GQA mapping"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 class(es) fail: GQA mapping"), std::string::npos) << r.out;
}

TEST(cli_audit, bad_flags_are_input_errors) {
  EXPECT_EQ(run_numprobe("audit --backend nosuch " + k_case).exit_code, 2);
  EXPECT_EQ(run_numprobe("audit --backend emu --seq 0 " + k_case).exit_code, 2);
  EXPECT_EQ(run_numprobe("audit --backend emu --bound 'zzz<=1' " + k_case).exit_code, 2);
}

TEST(cli_bisect_sweep, passing_case_runs_the_class_sweep_and_names_a_sentinel) {
  // N(0,1) logits never reach -1e4: the case passes at every length, and only the family sweep
  // (logits shifted to -1e4 ... -1e6) finds the finite sentinel.
  const auto r = run_numprobe("bisect --backend emu --inject finite-sentinel --seq 64..512 --heads 2 --kv-heads 1 "
                              "--head-dim 32 --rows 16 --json -");
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out.substr(0, 2000);
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["classification"], "finite sentinel");
  ASSERT_TRUE(j["family_sweep"].is_array());
  bool named = false;
  for (const auto& c : j["family_sweep"]) named |= c["name"] == "finite sentinel" && c["verdict"] == "fail";
  EXPECT_TRUE(named) << j["family_sweep"].dump();
}

}  // namespace
