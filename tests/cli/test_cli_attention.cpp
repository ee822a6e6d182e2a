// CLI contract of `attention`, `drift` and `backends`: real JSON output, exit codes, messages.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/run_command.hpp"

using numprobe::testing::run_numprobe;
using json = nlohmann::json;

namespace {

json parse_or_fail(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text.substr(0, 400);
  return j;
}

TEST(cli_attention, emu_json_has_the_contract_fields_and_a_healthy_ratio) {
  const auto r = run_numprobe(
      "attention --backend emu --seq 200 --queries 130 --heads 4 --kv-heads 2 --head-dim 64 "
      "--mask causal --seed 3 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["tool"], "numprobe");
  EXPECT_EQ(j["result"]["case"], "attention(T=130,S=200,Hq=4,Hkv=2,D=64,in=bf16,mask=causal,seed=3)");
  EXPECT_EQ(j["result"]["rows_evaluated"], 130);
  // A bf16 kernel has a non-zero error, of the order of bf16's unit roundoff 2^-9 (~2e-3).
  const double rel = j["result"]["rel_rms"];
  EXPECT_GT(rel, 1e-5);
  EXPECT_LT(rel, 2e-2);
  // FlashAttention's criterion for a healthy kernel: within 2x of the naive baseline.
  EXPECT_LE(j["result"]["ratio_to_naive"].get<double>(), 2.0);
  EXPECT_TRUE(j["result"].contains("end_to_end"));
  EXPECT_EQ(j["pass"], true);
}

TEST(cli_attention, ref_backend_has_zero_kernel_error) {
  const auto r = run_numprobe("attention --backend ref --seq 70 --heads 2 --kv-heads 1 --head-dim 32 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["result"]["rel_rms"].get<double>(), 0.0);
}

TEST(cli_attention, case_id_reruns_the_same_case) {
  const std::string id = "attention(T=5,S=97,Hq=2,Hkv=1,D=16,in=f16,mask=causal,dist=llm,seed=9)";
  const auto a = run_numprobe("attention --backend emu --case '" + id + "' --json -");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto b = run_numprobe(
      "attention --backend emu --queries 5 --seq 97 --heads 2 --kv-heads 1 --head-dim 16 --dtype f16 "
      "--mask causal --dist llm --seed 9 --json -");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ja = parse_or_fail(a.out), jb = parse_or_fail(b.out);
  EXPECT_EQ(ja["result"]["case"], id);
  EXPECT_EQ(ja["result"]["rel_rms"], jb["result"]["rel_rms"]);
}

TEST(cli_attention, breached_bound_exits_1) {
  const auto r = run_numprobe(
      "attention --backend emu --seq 300 --heads 2 --kv-heads 1 --head-dim 32 --dist rescale-stress "
      "--inject skip-rescale --bound 'ratio_to_naive<=2'");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL ratio_to_naive<=2"), std::string::npos) << r.out;
}

// Issue 27 item 4: with no --bound, attention gates on its documented default and says so.
TEST(cli_attention, a_broken_kernel_fails_the_default_gate_without_any_bound) {
  const std::string base =
      "attention --backend emu --seq 300 --heads 2 --kv-heads 1 --head-dim 32 --dist rescale-stress "
      "--inject skip-rescale";
  const auto r = run_numprobe(base + " --json -");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = parse_or_fail(r.out);
  bool seen = false;
  for (const auto& g : j["checks"][0]["gates"])
    if (g.value("default", false)) {
      seen = true;
      EXPECT_EQ(g["bound"], "ratio_to_naive<=2");
      EXPECT_FALSE(g["held"].get<bool>());
      EXPECT_NE(g["basis"].get<std::string>().find("FlashAttention"), std::string::npos);
    }
  EXPECT_TRUE(seen) << r.out;
  EXPECT_EQ(j["pass"], false);
  const auto text = run_numprobe(base);
  EXPECT_NE(text.out.find("FAIL ratio_to_naive<=2"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("default gate"), std::string::npos) << text.out;
  // --no-default-bound: the numbers are reported, nothing is gated but NaN/Inf.
  const auto off = run_numprobe(base + " --no-default-bound --json -");
  EXPECT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(parse_or_fail(off.out)["checks"][0]["gates"].size(), 1u) << off.out;
}

TEST(cli_attention, an_explicit_bound_replaces_the_default_gate) {
  const auto r = run_numprobe(
      "attention --backend emu --seq 300 --heads 2 --kv-heads 1 --head-dim 32 --inject skip-rescale "
      "--dist rescale-stress --bound 'ratio_to_naive<=1e9' --json -");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json j = parse_or_fail(r.out);  // bound to a name: a range-for over a temporary's member dangles
  for (const auto& g : j["checks"][0]["gates"]) EXPECT_FALSE(g.value("default", false));
}

TEST(cli_attention, fp8_points_take_twice_the_format_unit_roundoff_by_default) {
  // e4m3: u = 2^-4, so the default gate is rel_rms<=0.125 (ratio_to_naive means nothing there).
  const auto ok = run_numprobe("attention --backend emu --seq 600 --heads 2 --kv-heads 1 --head-dim 64 "
                               "--kv-format e4m3 --json -");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  const auto g = parse_or_fail(ok.out)["checks"][0]["gates"].back();
  EXPECT_EQ(g["bound"], "rel_rms<=0.125");
  EXPECT_TRUE(g.value("default", false));
  const auto bad = run_numprobe("attention --backend emu --seq 600 --heads 2 --kv-heads 1 --head-dim 64 "
                                "--kv-format e4m3 --kv-scale tensor --inject kv-scale-ignored --dist llm");
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
}

TEST(cli_attention, decode_fails_the_default_gate_on_a_base2_merge) {
  const auto r = run_numprobe("attention --backend emu --decode --seq 1000 --splits 4 --heads 2 --kv-heads 1 "
                              "--head-dim 64 --inject lse-base2-merge");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL ratio_to_naive<=2"), std::string::npos) << r.out;
}

TEST(cli_drift, a_broken_kernel_fails_the_default_gate_at_every_length) {
  const auto r = run_numprobe("drift --backend emu --seq 64..600 --heads 2 --kv-heads 1 --head-dim 32 "
                              "--dist rescale-stress --inject skip-rescale --no-e2e --json -");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["pass"], false);
  EXPECT_EQ(j["bounds"][0], "ratio_to_naive<=2");
  const auto off = run_numprobe("drift --backend emu --seq 64..600 --heads 2 --kv-heads 1 --head-dim 32 "
                                "--dist rescale-stress --inject skip-rescale --no-e2e --no-default-bound");
  EXPECT_EQ(off.exit_code, 0) << off.out << off.err;
}

struct bad_input {
  const char* args;
  int code;
  const char* needle;  // the one-line message names the flag or thing
};

class cli_bad_input : public ::testing::TestWithParam<bad_input> {};

TEST_P(cli_bad_input, exits_with_code_and_names_the_problem) {
  const auto& b = GetParam();
  const auto r = run_numprobe(b.args);
  EXPECT_EQ(r.exit_code, b.code) << b.args << "\n" << r.err;
  EXPECT_NE(r.err.find(b.needle), std::string::npos) << r.err;
  // One line: a message, not a stack trace or a usage dump.
  EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    cli, cli_bad_input,
    ::testing::Values(bad_input{"attention --seq 0", 2, "--seq"},
                      bad_input{"attention --seq abc", 2, "--seq"},
                      bad_input{"attention --heads 6 --kv-heads 4", 2, "--kv-heads"},
                      bad_input{"attention --dtype fp7", 2, "fp7"},
                      bad_input{"attention --mask diagonal", 2, "diagonal"},
                      bad_input{"attention --backend nosuch", 2, "nosuch"},
                      bad_input{"attention --inject nosuch-fault", 2, "nosuch-fault"},
                      bad_input{"attention --state x=bf16", 2, "x"},
                      bad_input{"attention --state l=bf17", 2, "bf17"},
                      bad_input{"attention --tile 64", 2, "--tile"},
                      bad_input{"attention --bound 'rel_rms<=x'", 2, "--bound"},
                      bad_input{"attention --bound 'nosuch<=1'", 2, "nosuch"},
                      bad_input{"attention --case 'attention(T=1,S=oops)'", 2, "S"},
                      bad_input{"attention --mask window", 2, "--window"},
                      bad_input{"drift --seq 100..10", 2, "--seq"},
                      bad_input{"drift --points log:0", 2, "--points"},
                      bad_input{"attention --no-such-flag", 2, "no-such-flag"}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

TEST(cli_attention, missing_gpu_backend_exits_3) {
  // Without a device (CI) or without CUDA compiled in, asking for it is a backend error.
  const auto r = run_numprobe("attention --backend hip --seq 64");
  if (r.exit_code == 0) GTEST_SKIP() << "a HIP device is present";
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("hip"), std::string::npos) << r.err;
}

TEST(cli_drift, json_curve_fields_and_csv) {
  const std::string csv = "/tmp/numprobe_cli_drift_" + std::to_string(::getpid()) + ".csv";
  const auto r = run_numprobe(
      "drift --backend emu --seq 32..300 --points tile --tile 32x32 --heads 2 --kv-heads 1 "
      "--head-dim 32 --rows 16 --json - --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_or_fail(r.out);
  ASSERT_TRUE(j["points"].is_array());
  ASSERT_GE(j["points"].size(), 6u);
  for (const auto& p : j["points"]) {
    const std::int64_t s = p["seq"];
    EXPECT_TRUE(s % 32 == 0 || s % 32 == 1 || s % 32 == 31) << s;
    EXPECT_TRUE(p["rel_rms"].is_number());
    EXPECT_TRUE(p["max_abs"].is_number());
    EXPECT_TRUE(p["ratio_to_naive"].is_number());
    EXPECT_TRUE(p["case"].get<std::string>().find("S=" + std::to_string(s)) != std::string::npos);
  }
  EXPECT_TRUE(j["growth"]["slope"].is_number());
  EXPECT_TRUE(j["growth"]["verdict"] == "flat" || j["growth"]["verdict"] == "grows");
  EXPECT_EQ(j["tile"]["k"], 32);
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("case,seq,", 0), 0u) << header;
  std::size_t lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  EXPECT_EQ(lines, j["points"].size());
  std::remove(csv.c_str());
}

TEST(cli_backends, lists_ref_and_emu) {
  const auto r = run_numprobe("backends --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_or_fail(r.out);
  std::set<std::string> names;
  for (const auto& b : j["backends"]) names.insert(b["name"]);
  EXPECT_TRUE(names.count("ref"));
  EXPECT_TRUE(names.count("emu"));
}

}  // namespace
