// End to end (the real binary): `numprobe mma --model NAME` runs the catalogue on a CPU model and
// the JSON's findings are the model's parameters (the classifier recovers them); the table
// names every property; --emit-vectors writes the device paths' vectors; an unknown model
// exits 2; without a device (this CI machine has none) `numprobe mma` exits 3 in one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/run_command.hpp"

using numprobe::testing::run_numprobe;
using json = nlohmann::json;

namespace {

TEST(cli_mma, model_json_recovers_the_model) {
  const auto r = run_numprobe("mma --model h200-wgmma-e4m3 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["command"], "mma");
  ASSERT_EQ(doc["paths"].size(), 1u);
  const json& f = doc["paths"][0]["findings"];
  // The model's table entry (src/kernels/emu/mma_model_table.cpp): 13 bits kept, truncation,
  // e8m13 output truncated, one group of 32, C in the group.
  EXPECT_EQ(f["fraction_bits"], 13);
  EXPECT_EQ(f["internal_rounding"], "toward-zero");
  EXPECT_EQ(f["output_fraction_bits"], 13);
  EXPECT_EQ(f["output_rounding"], "toward-zero");
  EXPECT_EQ(f["k_group"], 32);
  EXPECT_EQ(f["c_in_group"], true);
  EXPECT_EQ(f["products_exact"], true);
  // Evidence: each property carries its vectors, the measured outputs and each hypothesis'
  // predictions, one per vector.
  for (const json& p : doc["paths"][0]["properties"]) {
    SCOPED_TRACE(p["property"].get<std::string>());
    ASSERT_FALSE(p["vectors"].empty());
    EXPECT_EQ(p["measured"].size(), p["vectors"].size());
    for (const json& h : p["hypotheses"]) EXPECT_EQ(h["predicted"].size(), p["vectors"].size());
    EXPECT_EQ(p["vectors"][0]["a"].size(), 32u);
  }
}

TEST(cli_mma, model_table_names_each_property) {
  const auto r = run_numprobe("mma --model h200-mma-bf16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle : {"products", "fraction_bits", "F=25", "internal_rounding", "output_rounding",
                             "P=23 toward-zero", "grouping", "k_group=16", "c_handling", "subnormals",
                             "nonfinite"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(cli_mma, every_report_format_writes) {
  const auto md = run_numprobe("mma --model h200-wgmma-bf16 --md -");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| h200-wgmma-bf16 | fraction_bits |"), std::string::npos) << md.out;
  const auto csv = run_numprobe("mma --model h200-wgmma-bf16 --csv -");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.out.find("h200-wgmma-bf16,grouping,"), std::string::npos) << csv.out;
  const auto junit = run_numprobe("mma --model h200-wgmma-bf16 --junit -");
  ASSERT_EQ(junit.exit_code, 0) << junit.err;
  EXPECT_NE(junit.out.find("<testsuite"), std::string::npos) << junit.out;
}

TEST(cli_mma, emit_vectors_and_list_models) {
  const auto r = run_numprobe("mma --emit-vectors -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["paths"].size(), 5u);  // f16, bf16, tf32, e4m3, e5m2 mma.sync
  for (const json& p : doc["paths"]) EXPECT_GT(p["vectors"].size(), 20u);
  const auto l = run_numprobe("mma --list-models");
  ASSERT_EQ(l.exit_code, 0) << l.err;
  for (const char* name : {"h200-wgmma-e4m3", "h200-wgmma-bf16", "h200-mma-bf16"})
    EXPECT_NE(l.out.find(name), std::string::npos) << name;
}

TEST(cli_mma, unknown_model_exits_2) {
  const auto r = run_numprobe("mma --model nope");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("h200-wgmma-e4m3"), std::string::npos) << r.err;  // the known names listed
  EXPECT_EQ(run_numprobe("mma --device -1").exit_code, 2);
}

TEST(cli_mma, no_device_exits_3_in_one_line) {
  // No GPU here: a CPU-only build says it needs a GPU build; a CUDA build finds no device.
  const auto r = run_numprobe("mma");
  if (r.exit_code == 0) GTEST_SKIP() << "a GPU is present: scripts/gpu_mma.sh covers the device run";
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("needs a GPU"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

}  // namespace
