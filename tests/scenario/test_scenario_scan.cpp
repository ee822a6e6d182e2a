// The scan check runner: a checkpoint with one outlier tensor; per-tensor gates fail on exactly
// that tensor and name it, totals are reported, and a missing checkpoint is an input error.
#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <random>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "numprobe/io/safetensors.hpp"
#include "src/scenario/run_scenario.hpp"

namespace sc = numprobe::scenario;
using numprobe::result::status;

TEST(scan_runner, worst_tensor_gates_and_totals) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("np_scan_runner_{}", ::getpid());
  std::filesystem::create_directories(dir);
  constexpr std::uint64_t rows = 64, cols = 256;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> z(0.f, 0.02f);
  std::vector<float> a(rows * cols), b(rows * cols);
  for (auto& x : a) x = z(rng);
  for (auto& x : b) x = z(rng);
  // Column 3 of every row of the down projection is a 1000-sigma outlier: with NVFP4's 16-wide
  // blocks it sets its block's scale to 20/6, and the block's other 15 elements (|x| < 0.2
  // for 0.02-sigma data, far below the 0.25 x 20/6 = 0.83 rounding threshold of e2m1's
  // smallest step) all flush to zero.
  for (std::uint64_t r = 0; r < rows; ++r) b[r * cols + 3] = 20.0f;
  const auto ck = dir / "model.safetensors";
  numprobe::io::write_safetensors(ck, {numprobe::io::tensor_of("model.layers.0.self_attn.q_proj.weight", {rows, cols}, a),
                                       numprobe::io::tensor_of("model.layers.0.mlp.down_proj.weight", {rows, cols}, b)});
  const auto text = fmt::format(R"(
[[check]]
name = "scan"
probe = "scan"
checkpoint = "{}"
vs = ["mxfp4"]
rank_by = "sqnr"
bounds = ["outlier_blocks<=0", "sqnr_db>=1", "tensors>=2"]
)", ck.string());
  const auto r = sc::run_scenario(sc::parse_scenario(text, "s.toml"), {});
  ASSERT_EQ(r.checks.size(), 1u);
  const auto& c = r.checks[0];
  ASSERT_EQ(c.outcome, status::m_fail) << c.message;
  ASSERT_EQ(c.gates.size(), 3u);
  EXPECT_FALSE(c.gates[0].held);
  EXPECT_EQ(c.gates[0].case_id, "model.layers.0.mlp.down_proj.weight");
  EXPECT_GE(c.gates[0].measured, static_cast<double>(rows));  // one outlier block per row at least
  EXPECT_TRUE(c.gates[1].held);
  EXPECT_TRUE(c.gates[2].held);
  EXPECT_EQ(c.gates[2].measured, 2.0);
  const auto* bpe = c.find_metric("bits_per_element");
  ASSERT_NE(bpe, nullptr);
  EXPECT_NEAR(bpe->value, 4.5, 0.01);  // e2m1 + one e4m3 scale per 16 (+ one fp32 s_t per tensor)
  ASSERT_FALSE(c.tables.empty());
  // Ranked by SQNR, worst first: the SQNR gate names the same tensor. (The outlier tensor is
  // not the worst by SQNR: its energy sits in the outliers, which NVFP4 keeps.)
  // The view's ranked table: rank, tensor, shape, sqnr_db, rel_rms, bulk_rel_rms, flushed_%,
  // outlier_fl_%, max_abs, flushed, clipped, outlier_blk and the --vs schemes' SQNR in one column.
  ASSERT_EQ(c.tables[0].columns.size(), 13u);
  EXPECT_EQ(c.tables[0].rows.front()[0], "1");
  EXPECT_EQ(c.tables[0].rows.front()[1], c.gates[1].case_id);
  EXPECT_EQ(c.gates[1].case_id, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_NE(c.tables[0].rows.front()[12].find("mxfp4"), std::string::npos) << c.tables[0].rows.front()[12];
  std::filesystem::remove_all(dir);
}

TEST(scan_runner, missing_checkpoint_and_unknown_metric_are_input_errors) {
  EXPECT_THROW((void)sc::parse_scenario("[[check]]\nname='a'\nprobe='scan'\ncheckpoint='x'\nbound='kld.mean<=1'\n", "s.toml"),
               numprobe::error);
  const auto r = sc::run_scenario(
      sc::parse_scenario("[[check]]\nname='a'\nprobe='scan'\ncheckpoint='/nonexistent/model.safetensors'\n", "s.toml"), {});
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].outcome, status::m_error);
  EXPECT_EQ(r.checks[0].error_code, 2);
}

TEST(scan_runner, unknown_rank_by_is_an_input_error_naming_the_key) {
  const auto r = sc::run_scenario(
      sc::parse_scenario("[[check]]\nname='a'\nprobe='scan'\ncheckpoint='/nonexistent/m.safetensors'\nrank_by='snr'\n", "s.toml"), {});
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].outcome, status::m_error);
  EXPECT_EQ(r.checks[0].error_code, 2);
  EXPECT_NE(r.checks[0].message.find("rank_by"), std::string::npos) << r.checks[0].message;
}
