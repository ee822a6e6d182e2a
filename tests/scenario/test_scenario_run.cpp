// Gate evaluation and the run engine: outcomes, per-check errors, exit codes, shards, journal.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <set>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "src/scenario/check_runner.hpp"
#include "src/scenario/run_scenario.hpp"

namespace sc = numprobe::scenario;
using numprobe::result::status;

namespace {

// Small, fast checks: the reference backend (error 0) and a tiny quantization.
const char* k_text = R"(
[defaults]
seed = 3

[[check]]
name = "ref-pass"
probe = "attention"
backend = "ref"
seq = 40
heads = 2
kv_heads = 1
head_dim = 16
bound = "rel_rms<=0"

[[check]]
name = "quant-breach"
probe = "quant"
scheme = "nvfp4"
shape = "16x64"
bound = "sqnr_db>=60"
basis = "fp4 cannot reach 60 dB: this gate must fail"

[[check]]
name = "bad-case"
probe = "attention"
backend = "ref"
seq = 40
heads = 3
kv_heads = 2
head_dim = 16

[[check]]
name = "no-device"
probe = "attention"
backend = "cuda"
seq = 40
heads = 2
kv_heads = 1
head_dim = 16

[[check]]
name = "quant-pass"
probe = "quant"
scheme = "mxfp8"
shape = "16x64"
bound = "sqnr_db>=20"
)";

TEST(gates, nan_and_unmeasured_never_hold) {
  const auto b = numprobe::parse_bound("rel_rms<=1");
  EXPECT_TRUE(sc::evaluate_gate(b, 0.5, "c").held);
  EXPECT_FALSE(sc::evaluate_gate(b, 2.0, "c").held);
  EXPECT_FALSE(sc::evaluate_gate(b, std::nan(""), "c").held);
  const auto g = sc::evaluate_gate(b, std::nullopt, "c");
  EXPECT_FALSE(g.held);
  EXPECT_TRUE(std::isnan(g.measured));
  EXPECT_EQ(g.case_id, "c");
  EXPECT_EQ(g.bound, "rel_rms<=1");
}

TEST(run_engine, outcomes_errors_and_worst_exit_code) {
  const auto s = sc::parse_scenario(k_text, "t.toml");
  const auto r = sc::run_scenario(s, {});
  ASSERT_EQ(r.checks.size(), 5u);
  EXPECT_FALSE(r.incomplete);
  EXPECT_EQ(r.checks[0].outcome, status::m_pass) << r.checks[0].message;
  EXPECT_EQ(r.checks[0].backend, "ref");
  EXPECT_EQ(r.checks[1].outcome, status::m_fail);
  ASSERT_EQ(r.checks[1].gates.size(), 1u);
  EXPECT_FALSE(r.checks[1].gates[0].held);
  EXPECT_GT(r.checks[1].gates[0].measured, 10.0);
  EXPECT_EQ(r.checks[1].gates[0].basis, "fp4 cannot reach 60 dB: this gate must fail");
  // Hq = 3 is not a multiple of Hkv = 2: an input error for that check only (exit 2).
  EXPECT_EQ(r.checks[2].outcome, status::m_error);
  EXPECT_EQ(r.checks[2].error_code, 2);
  EXPECT_NE(r.checks[2].message.find("t.toml"), std::string::npos) << r.checks[2].message;
  // No CUDA in this build (or no device): a backend error for that check only (exit 3).
  EXPECT_EQ(r.checks[3].outcome, status::m_error);
  EXPECT_EQ(r.checks[3].error_code, 3);
  EXPECT_EQ(r.checks[4].outcome, status::m_pass);
  EXPECT_EQ(r.exit_code(), 3);
}

TEST(run_engine, exit_code_is_the_worst_outcome) {
  auto s = sc::parse_scenario(k_text, "t.toml");
  sc::run_options o;
  o.filter = "^quant-";
  EXPECT_EQ(sc::run_scenario(s, o).exit_code(), 1);
  o.filter = "quant-pass";
  EXPECT_EQ(sc::run_scenario(s, o).exit_code(), 0);
  o.filter = "bad-case|quant";
  EXPECT_EQ(sc::run_scenario(s, o).exit_code(), 2);
}

TEST(run_engine, backend_override_replaces_every_backend) {
  const auto s = sc::parse_scenario(k_text, "t.toml");
  sc::run_options o;
  o.filter = "no-device";
  o.backend_override = "ref";
  const auto r = sc::run_scenario(s, o);
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].outcome, status::m_pass) << r.checks[0].message;
  EXPECT_EQ(r.checks[0].backend, "ref");
}

TEST(run_engine, shards_cover_every_check_exactly_once) {
  const auto s = sc::parse_scenario(k_text, "t.toml");
  for (int n : {1, 2, 3, 7}) {
    std::multiset<std::string> seen;
    for (int i = 0; i < n; ++i) {
      sc::run_options o;
      o.shard = sc::parse_shard(std::to_string(i) + "/" + std::to_string(n));
      for (const auto* c : sc::select_checks(s, o)) seen.insert(c->name);
    }
    EXPECT_EQ(seen.size(), s.checks.size()) << n;
    for (const auto& c : s.checks) EXPECT_EQ(seen.count(c.name), 1u) << c.name;
  }
  for (const char* bad : {"3/3", "1", "-1/2", "a/b", "0/0"}) EXPECT_THROW((void)sc::parse_shard(bad), numprobe::error) << bad;
}

TEST(run_engine, resume_reuses_the_journal) {
  const auto dir = std::filesystem::temp_directory_path() / ("numprobe_journal_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto s = sc::parse_scenario(k_text, "t.toml");
  sc::run_options o;
  o.filter = "quant";
  o.journal = (dir / "journal.jsonl").string();
  const auto first = sc::run_scenario(s, o);
  ASSERT_EQ(first.checks.size(), 2u);
  o.resume = true;
  const auto second = sc::run_scenario(s, o);
  EXPECT_EQ(second.checks_resumed, 2);
  ASSERT_EQ(second.checks.size(), 2u);
  EXPECT_EQ(second.checks[1].metrics.size(), first.checks[1].metrics.size());
  EXPECT_EQ(second.checks[1].find_metric("sqnr_db")->value, first.checks[1].find_metric("sqnr_db")->value);
  // A journal of another scenario is refused.
  const auto other = sc::parse_scenario("[[check]]\nname = \"x\"\nprobe = \"quant\"\nshape = \"4x16\"\n", "o.toml");
  EXPECT_THROW((void)sc::run_scenario(other, o), numprobe::error);
  std::filesystem::remove_all(dir);
}

}  // namespace

// probe = "quant" with gemm: the dequant GEMM's metrics reach the gates. Bases: the
// h200-wgmma-e4m3 accumulator keeps 13 fraction bits (truncated), fp32 24, so its error over the
// same quantized operands is of order 2^-13 ~ 1.2e-4 (far above 1e-6) and hundreds of times the
// fp32 accumulator's (far above 10).
TEST(run_engine, quant_gemm_metrics_reach_the_gates) {
  const auto s = sc::parse_scenario(R"(
[[check]]
name = "gemm-ratio"
probe = "quant"
scheme = "fp8-block128"
shape = "64x512"
gemm = 4
acc_model = "h200-wgmma-e4m3"
bound = "gemm_acc_ratio>=10"

[[check]]
name = "gemm-tight"
probe = "quant"
scheme = "fp8-tensor"
shape = "64x512"
gemm = 4
acc_model = "h200-wgmma-e4m3"
bound = "gemm_acc_rel_rms<=1e-6"

[[check]]
name = "gemm-missing"
probe = "quant"
scheme = "fp8-tensor"
shape = "64x512"
acc_model = "h200-wgmma-e4m3"
)", "g.toml");
  const auto r = sc::run_scenario(s, {});
  ASSERT_EQ(r.checks.size(), 3u);
  EXPECT_EQ(r.checks[0].outcome, status::m_pass) << r.checks[0].message;
  EXPECT_EQ(r.checks[1].outcome, status::m_fail) << r.checks[1].message;
  ASSERT_EQ(r.checks[1].gates.size(), 1u);
  EXPECT_GT(r.checks[1].gates[0].measured, 1e-5);
  EXPECT_EQ(r.checks[2].outcome, status::m_error);  // acc_model without gemm
  EXPECT_EQ(r.checks[2].error_code, 2);
}
