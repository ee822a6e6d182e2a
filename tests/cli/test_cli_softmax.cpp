// CLI contract of `softmax`: real JSON output, exit 1 on NaN or a breached bound, exit 2 on bad
// input with a one-line message naming the flag.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>

#include "support/run_command.hpp"

using numprobe::testing::run_numprobe;
using json = nlohmann::json;

namespace {

json parse_or_fail(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text.substr(0, 400);
  return j;
}

TEST(cli_softmax, emu_json_has_the_contract_fields_and_a_healthy_ratio) {
  const auto r = run_numprobe("softmax --backend emu --vocab 5000 --rows 3 --chunk 512 --mask padding --seed 3 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["command"], "softmax");
  EXPECT_EQ(j["result"]["case"], "softmax(V=5000,R=3,in=bf16,mask=padding,seed=3)");
  EXPECT_EQ(j["result"]["chunks"], 10);
  // fp32 states: the error is a few fp32 unit roundoffs, like the naive fp32 softmax's.
  EXPECT_LT(j["result"]["rel_rms"].get<double>(), 1e-5);
  EXPECT_LE(j["result"]["ratio_to_naive"].get<double>(), 2.0);
  EXPECT_EQ(j["result"]["top1"].get<double>(), 1.0);
  EXPECT_TRUE(j["result"].contains("end_to_end"));
  EXPECT_EQ(j["pass"], true);
}

// `backends` lists the softmax and quantize families beside the attention list (`backends`).
TEST(cli_softmax, backends_lists_the_softmax_and_quant_families) {
  const auto r = run_numprobe("backends --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_or_fail(r.out);
  const auto names = [&](const char* field) {
    std::set<std::string> out;
    for (const auto& b : j[field]) out.insert(b["name"].get<std::string>());
    return out;
  };
  EXPECT_EQ(names("softmax_backends"), (std::set<std::string>{"cuda", "emu", "exec", "exec-worker", "ref"}));
  EXPECT_TRUE(names("quant_backends").count("exec"));
  EXPECT_TRUE(names("backends").count("emu"));
}

TEST(cli_softmax, nan_from_a_fault_exits_1) {
  const auto r = run_numprobe("softmax --vocab 3000 --rows 2 --chunk 256 --mask first-chunk --inject no-empty-guard --json -");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = parse_or_fail(r.out);
  EXPECT_GT(j["result"]["nan_count"].get<int>(), 0);
  EXPECT_EQ(j["result"]["case"], "softmax(V=3000,R=2,in=bf16,mask=first-chunk,masked=256,seed=7)");
  EXPECT_EQ(j["pass"], false);
}

TEST(cli_softmax, all_masked_rows_pass_with_lse_minus_inf) {
  const auto r = run_numprobe("softmax --vocab 700 --rows 2 --mask all --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_or_fail(r.out)["result"]["nan_count"], 0);
}

TEST(cli_softmax, breached_bound_exits_1_and_says_fail) {
  const auto r = run_numprobe("softmax --vocab 20000 --rows 2 --chunk 256 --dist diffuse --dtype f32 "
                              "--inject rowsum-bf16 --bound 'ratio_to_naive<=2'");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL ratio_to_naive<=2"), std::string::npos) << r.out;
}

TEST(cli_softmax, vocab_sweep_crosses_chunk_boundaries_and_fits_growth) {
  const auto r = run_numprobe("softmax --vocab 200..2100 --rows 1 --chunk 512 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_or_fail(r.out);
  ASSERT_TRUE(j["points"].is_array());
  bool saw_multiple = false, saw_plus_one = false;
  for (const auto& p : j["points"]) {
    saw_multiple |= p["vocab_mod_chunk"] == 0;
    saw_plus_one |= p["vocab_mod_chunk"] == 1;
  }
  EXPECT_TRUE(saw_multiple);
  EXPECT_TRUE(saw_plus_one);
  EXPECT_EQ(j["growth"]["x"], "chunks");
  EXPECT_TRUE(j["growth"]["slope"].is_number());
  EXPECT_GE(j["growth"]["points"].get<int>(), 6);
}

struct bad_input {
  const char* args;
  int code;
  const char* needle;
};
class cli_softmax_bad_input : public ::testing::TestWithParam<bad_input> {};

TEST_P(cli_softmax_bad_input, exits_with_code_and_names_the_problem) {
  const auto& b = GetParam();
  const auto r = run_numprobe(b.args);
  EXPECT_EQ(r.exit_code, b.code) << b.args << "\n" << r.err;
  EXPECT_NE(r.err.find(b.needle), std::string::npos) << r.err;
  EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

INSTANTIATE_TEST_SUITE_P(cases, cli_softmax_bad_input,
                         ::testing::Values(bad_input{"softmax --vocab 0", 2, "--vocab"},
                                           bad_input{"softmax --vocab 10..5", 2, "--vocab"},
                                           bad_input{"softmax --vocab 100 --mask nope", 2, "--mask"},
                                           bad_input{"softmax --vocab 100 --inject skip-rescale", 2, "--inject"},
                                           bad_input{"softmax --vocab 100 --chunk 0", 2, "--chunk"},
                                           bad_input{"softmax --vocab 100 --temperature 0", 2, "--temperature"},
                                           bad_input{"softmax --vocab 100 --bound 'bogus<=1'", 2, "--bound"},
                                           bad_input{"softmax --vocab 100 --backend nope", 2, "--backend"},
                                           bad_input{"softmax --vocab 100 --state q=bf16", 2, "--state"},
                                           bad_input{"softmax --vocab 100 --case 'softmax(V=x)'", 2, "V"}));

}  // namespace

// Issue 27 item 4: softmax gates on ratio_to_naive<=2 by default, with the fp32 noise floor so
// that a healthy fp32 kernel whose summation order differs from the naive one still passes.
TEST(cli_softmax, default_gate_passes_healthy_fp32_and_fails_a_bf16_running_sum) {
  for (const char* args : {"--chunk 256 --dist diffuse", "--chunk 4096 --dist normal", "--exp2 --dist max-first"}) {
    const auto r = run_numprobe(std::string("softmax --backend emu --vocab 200000 --rows 2 ") + args + " --json -");
    EXPECT_EQ(r.exit_code, 0) << args << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_TRUE(j["checks"][0]["gates"].back().value("default", false)) << r.out;
  }
  const auto bad = run_numprobe("softmax --backend emu --vocab 32000 --rows 2 --state l=bf16");
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("default gate"), std::string::npos) << bad.out;
  const auto off = run_numprobe("softmax --backend emu --vocab 32000 --rows 2 --state l=bf16 --no-default-bound");
  EXPECT_EQ(off.exit_code, 0) << off.out << off.err;
}
