// CLI contract of `bisect`: JSON fields (trace[], classification, culprit, first_failing_seq,
// tile_aligned, schema_version), the Markdown report, exit codes 0 / 1 / 2, and a terminal trace.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "support/run_command.hpp"

using numprobe::testing::run_numprobe;
using json = nlohmann::json;

namespace {

const std::string k_small = "--heads 2 --kv-heads 1 --head-dim 32 --tile 32x32 --rows 16 --seed 5 ";

json parse_or_fail(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text.substr(0, 400);
  return j;
}

TEST(cli_bisect, failing_emu_case_gives_the_contract_fields_and_exit_1) {
  const auto r = run_numprobe("bisect --backend emu --seq 32..1024 --dist rescale-stress --mask none "
                              "--inject skip-rescale " + k_small + "--json -");
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out.substr(0, 400);
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["tool"], "numprobe");
  // skip-rescale: NUMERICS.md's "rescale or merge frame".
  EXPECT_EQ(j["classification"], "rescale or merge frame");
  ASSERT_TRUE(j["first_failing_seq"].is_number_integer());
  EXPECT_GE(j["first_failing_seq"].get<int>(), 32);
  EXPECT_LE(j["first_failing_seq"].get<int>(), 1024);
  EXPECT_TRUE(j["tile_aligned"].is_boolean());
  EXPECT_TRUE(j.contains("culprit"));
  ASSERT_TRUE(j["trace"].is_array());
  ASSERT_GT(j["trace"].size(), 5u);
  for (const auto& s : j["trace"]) {
    EXPECT_TRUE(s["case"].get<std::string>().rfind("attention(", 0) == 0) << s.dump();
    EXPECT_TRUE(s.contains("change"));
    EXPECT_TRUE(s.contains("decision"));
    EXPECT_TRUE(s.contains("seconds"));
    EXPECT_TRUE(s["failed"].is_boolean());
  }
  EXPECT_EQ(j["bounds"][0], "ratio_to_naive<=2");
}

TEST(cli_bisect, healthy_kernel_is_no_failure_and_exit_0) {
  const auto r = run_numprobe("bisect --backend emu --seq 32..512 --dist normal --mask causal " + k_small +
                              "--json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["classification"], "no failure");
  EXPECT_TRUE(j["culprit"].is_null());
  EXPECT_TRUE(j["first_failing_seq"].is_null());
}

TEST(cli_bisect, terminal_trace_and_markdown_report) {
  const std::string md = "/tmp/numprobe_test_bisect_" + std::to_string(::getpid()) + ".md";
  const auto r = run_numprobe("bisect --backend emu --seq 32..1024 --dist diffuse --mask none "
                              "--inject rowsum-bf16 " + k_small + "--md " + md);
  ASSERT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("first failing seq"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("classification     low-precision accumulation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("state l (running sum l)"), std::string::npos) << r.out;
  std::ifstream in(md);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("# numprobe bisect"), std::string::npos);
  EXPECT_NE(ss.str().find("## Trace"), std::string::npos);
  EXPECT_NE(ss.str().find("| 1 | length |"), std::string::npos) << ss.str().substr(0, 600);
  std::remove(md.c_str());
}

TEST(cli_bisect, bad_flags_exit_2_naming_the_flag) {
  // `--seq N` means up to N (issue 14); a length that is not a positive integer is refused.
  auto r = run_numprobe("bisect --backend emu --seq 0 " + k_small);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--seq"), std::string::npos) << r.err;
  r = run_numprobe("bisect --backend emu --seq 64 --json - " + k_small);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"classification\""), std::string::npos) << r.out.substr(0, 400);
  r = run_numprobe("bisect --backend emu --seq 64..128 --bound 'nonsense<=2' " + k_small);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bound"), std::string::npos) << r.err;
  r = run_numprobe("bisect --backend emu --seq 64..128 --inject no-such-fault " + k_small);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--inject"), std::string::npos) << r.err;
}

}  // namespace
