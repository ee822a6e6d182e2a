// End to end (the real binary): `numprobe invariance` on the emulator. The JSON lists every check
// with its counts, histogram, first difference and case ids; split-heuristic is a within-bound
// finding of `splits` (exit 0), a failure with `--require splits` (exit 1); bad flags exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "support/run_command.hpp"

using numprobe::testing::run_numprobe;
using json = nlohmann::json;

namespace {

// Three key tiles of 32 at S = 65; 64 sequences of 2 heads change FA2's split count.
const std::string k_small =
    "invariance --backend emu --tile 32x32 --seq 65 --heads 2 --kv-heads 1 --head-dim 16 --batch-sizes 1,64";

TEST(cli_invariance, json_lists_every_check_and_the_split_finding) {
  const auto r = run_numprobe(k_small + " --inject split-heuristic --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_TRUE(doc.contains("invariance"));
  const json& checks = doc["invariance"];
  ASSERT_EQ(checks.size(), 5u);
  for (const json& c : checks) {
    SCOPED_TRACE(c["name"].get<std::string>());
    for (const char* key : {"name", "verdict", "differing", "compared", "max_ulp", "ulp_histogram", "first", "cases"})
      EXPECT_TRUE(c.contains(key)) << key;
    EXPECT_GT(c["compared"].get<std::int64_t>(), 0);
    EXPECT_EQ(c["cases"].size(), 2u);
    if (c["name"] == "splits") {
      EXPECT_EQ(c["verdict"], "within-bound");
      EXPECT_GT(c["differing"].get<std::int64_t>(), 0);
      EXPECT_GE(c["first"]["row"].get<std::int64_t>(), 0);
      EXPECT_FALSE(c["ulp_histogram"].empty());
      EXPECT_NE(c["cases"][1].get<std::string>().find("member 0 of 64"), std::string::npos);
    } else {
      EXPECT_EQ(c["verdict"], "invariant");
      EXPECT_EQ(c["differing"], 0);
      EXPECT_TRUE(c["first"].is_null());
    }
  }
}

TEST(cli_invariance, require_makes_a_difference_fail_and_every_format_writes) {
  const auto r = run_numprobe(k_small + " --checks splits --inject split-heuristic --require splits --md - ");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("within-bound"), std::string::npos) << r.out;
  const auto csv = run_numprobe(k_small + " --checks chunk --inject chunk-rescale --csv -");
  EXPECT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_FALSE(csv.out.empty());
  const auto junit = run_numprobe(k_small + " --checks chunk --inject chunk-rescale --require chunk --junit -");
  EXPECT_EQ(junit.exit_code, 1) << junit.err;
  EXPECT_NE(junit.out.find("<testsuite"), std::string::npos) << junit.out;
}

TEST(cli_invariance, bad_flags_exit_2) {
  EXPECT_EQ(run_numprobe(k_small + " --checks repeat,bogus").exit_code, 2);
  EXPECT_EQ(run_numprobe(k_small + " --require decod").exit_code, 2);
  EXPECT_EQ(run_numprobe(k_small + " --batch-sizes 0").exit_code, 2);
  EXPECT_EQ(run_numprobe(k_small + " --batch 2").exit_code, 2);
}

// `invariance` as a scenario check kind: the same checks and verdicts through `numprobe run`,
// a required check that differs fails the scenario check (exit 1), one that may differ passes.
TEST(cli_invariance, scenario_check_kind) {
  const auto dir = std::filesystem::temp_directory_path() / ("numprobe_inv_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "s.toml").string();
  std::ofstream(path) << R"(title = "invariance"
[defaults]
backend = "emu"
tile = "32x32"
seq = 65
heads = 2
kv_heads = 1
head_dim = 16
batch_sizes = "1,64"
inject = ["split-heuristic"]
checks = ["repeat", "splits"]
[[check]]
name = "may-differ"
probe = "invariance"
[[check]]
name = "must-not"
probe = "invariance"
require = ["splits"]
)";
  const auto r = run_numprobe("run " + path + " --json -");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["checks"].size(), 2u);
  for (const json& c : doc["checks"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const json& inv = c["details"]["invariance"];
    ASSERT_EQ(inv.size(), 2u);
    EXPECT_EQ(inv[0]["name"], "repeat");
    EXPECT_EQ(inv[0]["verdict"], "invariant");
    EXPECT_EQ(inv[1]["name"], "splits");
    EXPECT_EQ(inv[1]["verdict"], "within-bound");
    EXPECT_EQ(c["status"].get<std::string>(), std::string(c["name"] == "may-differ" ? "PASS" : "FAIL"));
  }
}

}  // namespace
