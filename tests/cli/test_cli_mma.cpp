// End to end (the real binary): `numprobe mma --model NAME` runs the catalogue on a CPU model and
// the JSON's findings are the model's parameters (the classifier recovers them); the table
// names every property; --emit-vectors writes the device paths' vectors; an unknown model
// exits 2; without a device (this CI machine has none) `numprobe mma` exits 3 in one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <algorithm>

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
  // fp32 accumulators: f16, bf16, tf32, e4m3, e5m2 (mma.sync, then wgmma); fp16: f16, e4m3,
  // e5m2 (mma.sync, then wgmma); s8 with s32, wrapping and .satfinite (mma.sync, then wgmma);
  // wgmma with A from registers (fp32 accumulators).
  ASSERT_EQ(doc["paths"].size(), 25u);
  for (const json& p : doc["paths"]) {
    // The integer catalogue is 2 product and 4 overflow vectors; the floating one far more.
    EXPECT_GT(p["vectors"].size(), p["input"] == "int8" ? 5u : 20u) << p["path"];
    EXPECT_TRUE(p.contains("accumulator")) << p["path"];
  }
  EXPECT_EQ(doc["paths"][0]["path"], "mma.sync.m16n8k16.f32.f16");
  EXPECT_EQ(doc["paths"][8]["path"], "wgmma.m64n8k32.f32.e4m3");
  EXPECT_EQ(doc["paths"][10]["accumulator"], "f16");
  EXPECT_EQ(doc["paths"][19]["accumulator"], "s32.satfinite");
  EXPECT_EQ(doc["paths"][24]["path"], "wgmma.rs.m64n8k32.f32.e5m2");
  const auto l = run_numprobe("mma --list-models");
  ASSERT_EQ(l.exit_code, 0) << l.err;
  for (const char* name : {"h200-wgmma-e4m3", "h200-wgmma-bf16", "h200-mma-bf16", "h200-wgmma-e4m3-f16acc",
                           "h200-mma-s8-satfinite"})
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

// --agree on a CPU model: the model measured from the catalogue, run against the model's own
// outputs on random and adversarial vectors, agrees on every one (the device run is the same
// code with the GPU's outputs); the table and the JSON carry the counts.
TEST(cli_mma, agree_on_a_model_counts_every_vector_equal) {
  const auto r = run_numprobe("mma --model h200-mma-bf16 --agree 400 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["agreement"].size(), 1u);
  const json& a = doc["agreement"][0];
  EXPECT_EQ(a["model"], "measured");
  EXPECT_EQ(a["vectors"], 400);
  EXPECT_EQ(a["equal"], 400);
  EXPECT_EQ(a["families"]["cancel"]["vectors"], 100);
  EXPECT_TRUE(a["first_disagreements"].empty());
  const auto t = run_numprobe("mma --model h200-mma-bf16 --agree 40");
  EXPECT_NE(t.out.find("model agreement"), std::string::npos) << t.out;
}

// --promotion: the relative error of long dot products per promotion interval; never promoting
// loses more than promoting every 4 instructions (DeepSeek-V3's interval).
TEST(cli_mma, promotion_table_and_json) {
  const auto r = run_numprobe("mma --model h200-wgmma-e4m3 --promotion --promotion-lengths 4096 --promote-every 4,0 "
                              "--inputs positive --samples 4 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["promotion"].size(), 2u);
  EXPECT_EQ(doc["promotion"][0]["promote_every"], 4);
  EXPECT_EQ(doc["promotion"][1]["promote_every"], 0);
  EXPECT_GT(doc["promotion"][1]["max_rel"].get<double>(), doc["promotion"][0]["max_rel"].get<double>());
  EXPECT_EQ(run_numprobe("mma --promotion").exit_code, 2);  // needs --model
  EXPECT_EQ(run_numprobe("mma --model h200-wgmma-e4m3 --promotion --promotion-lengths 100").exit_code, 2);
  EXPECT_EQ(run_numprobe("mma --model h200-wgmma-e4m3 --samples 3").exit_code, 2);  // only with --promotion
  EXPECT_EQ(run_numprobe("mma --model h200-wgmma-e4m3 --agree -1").exit_code, 2);
}

// --run-vectors: a user's vectors through a path (here --model h200-mma-f16: F = 25, truncation).
// Hand-derived: the pair 2^15 * 2^15 - 2^15 * 2^15 fixes the group's exponent at 30, so a third
// product of 2^5 = 2^(30-25) is kept and one of 2^3 = 2^(30-27) is dropped; 1 + 1 + 0.5 is exact.
TEST(cli_mma, run_vectors_through_a_model) {
  const auto dir = std::filesystem::temp_directory_path() / ("numprobe_mma_vec_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream((dir / name).string()) << text;
    return (dir / name).string();
  };
  auto vec = [](const std::string& a2, const std::string& b2, const std::string& c) {
    std::string a = "[32768,-32768," + a2, b = "[32768,32768," + b2;
    for (int i = 3; i < 16; ++i) a += ",0", b += ",0";
    return "{\"a\":" + a + "],\"b\":" + b + "],\"c\":" + c + "}";
  };
  std::string ones = "{\"id\":\"ones\",\"a\":[1,1", onesb = "\"b\":[1,1";
  for (int i = 2; i < 16; ++i) ones += ",0", onesb += ",0";
  const std::string good = write("v.json", "{\"paths\":[{\"input\":\"f16\",\"k\":16,\"vectors\":[" + vec("8", "4", "0") + "," +
                                               vec("4", "2", "0") + "," + ones + "]," + onesb + "],\"c\":0.5}]}]}");
  const auto r = run_numprobe("mma --model h200-mma-f16 --run-vectors " + good + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  const json& v = doc["paths"][0]["vectors"];
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0]["measured"], 32.0);
  EXPECT_EQ(v[1]["measured"], 0.0);
  EXPECT_EQ(v[2]["measured"], 2.5);
  // Bad files: one line naming the place, exit 2.
  const auto not_f16 = write("bad1.json", "{\"paths\":[{\"input\":\"f16\",\"k\":16,\"vectors\":[" + vec("1e-9", "1", "0") + "]}]}");
  const auto bad = run_numprobe("mma --model h200-mma-f16 --run-vectors " + not_f16);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("vectors[0]"), std::string::npos) << bad.err;
  const auto short_a = write("bad2.json", "{\"paths\":[{\"input\":\"f16\",\"k\":16,\"vectors\":[{\"a\":[1],\"b\":[1]}]}]}");
  EXPECT_EQ(run_numprobe("mma --model h200-mma-f16 --run-vectors " + short_a).exit_code, 2);
  EXPECT_EQ(run_numprobe("mma --model h200-mma-f16 --run-vectors " + write("bad3.json", "{nope")).exit_code, 2);
  const auto other_k = write("bad4.json", "{\"paths\":[{\"input\":\"f16\",\"k\":8,\"vectors\":[]}]}");
  EXPECT_EQ(run_numprobe("mma --model h200-mma-f16 --run-vectors " + other_k).exit_code, 2);
  std::filesystem::remove_all(dir);
}

// The s8 and fp16-accumulator paths through --run-vectors: exact s32 sums (32 * 127 * 127 + 5 =
// 516133, within s32), wrapping past 2^31 - 1 (2147483647 + 32 ones = 2147483679, minus 2^32:
// -2147483617), and C checked
// against the path's accumulator: 0.5 is no s32, 1.0001 no fp16, 200 no s8; each one line and
// exit 2.
TEST(cli_mma, run_vectors_checks_the_accumulator_of_the_path) {
  const auto dir = std::filesystem::temp_directory_path() / ("numprobe_mma_acc_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto file = [&](const std::string& name, const std::string& path, const std::string& input, int k,
                  const std::string& a0, const std::string& rest, const std::string& c) {
    std::string a = "[" + a0, b = "[" + rest;
    for (int i = 1; i < k; ++i) a += "," + rest, b += "," + rest;
    std::ofstream((dir / name).string()) << "{\"paths\":[{\"path\":\"" << path << "\",\"input\":\"" << input
                                           << "\",\"k\":" << k << ",\"vectors\":[{\"a\":" << a << "],\"b\":" << b
                                           << "],\"c\":" << c << "}]}]}";
    return (dir / name).string();
  };
  const auto exact = run_numprobe("mma --model h200-mma-s8 --run-vectors " +
                                  file("s8.json", "mma.sync.m16n8k32.s32.s8", "int8", 32, "127", "127", "5") + " --json -");
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_EQ(json::parse(exact.out)["paths"][0]["vectors"][0]["measured"], 516133.0);
  const auto wraps = run_numprobe("mma --model h200-mma-s8 --run-vectors " +
                                  file("wrap.json", "mma.sync.m16n8k32.s32.s8", "int8", 32, "1", "1", "2147483647") +
                                  " --json -");
  ASSERT_EQ(wraps.exit_code, 0) << wraps.err;
  EXPECT_EQ(json::parse(wraps.out)["paths"][0]["vectors"][0]["measured"], -2147483617.0);
  for (const auto& [name, model, path, input, k, a0, c, says] :
       {std::tuple{"c_s32.json", "h200-mma-s8", "mma.sync.m16n8k32.s32.s8", "int8", 32, "1", "0.5", "s32 accumulator"},
        std::tuple{"c_f16.json", "h200-mma-f16-f16acc", "mma.sync.m16n8k16.f16.f16", "f16", 16, "1", "1.0001",
                   "f16 accumulator"},
        std::tuple{"a_s8.json", "h200-mma-s8", "mma.sync.m16n8k32.s32.s8", "int8", 32, "200", "0", "not a value of int8"}}) {
    const auto r = run_numprobe(std::string("mma --model ") + model + " --run-vectors " +
                                file(name, path, input, k, a0, "1", c));
    EXPECT_EQ(r.exit_code, 2) << name;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
