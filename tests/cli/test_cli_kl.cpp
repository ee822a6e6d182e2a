// CLI contract of `kl`: real JSON output with the fields, gates (exit 1), and bad
// inputs (exit 2 with a one-line message naming the problem).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "numprobe/base/rng.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/io/safetensors.hpp"
#include "support/run_command.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using numprobe::testing::run_numprobe;

struct kl_files {
  fs::path dir = fs::temp_directory_path() / ("numprobe_cli_kl_" + std::to_string(::getpid()));
  std::string base, cand;
  kl_files() {
    fs::create_directories(dir);
    const std::uint64_t n = 64, v = 500;
    std::vector<float> b(n * v), c(n * v);
    for (std::size_t i = 0; i < b.size(); ++i) {
      b[i] = static_cast<float>(3.0 * numprobe::normal_at(1, 1, i));
      c[i] = b[i] + static_cast<float>(0.2 * numprobe::normal_at(1, 2, i));
    }
    base = (dir / "base.npy").string();
    cand = (dir / "cand.npy").string();
    numprobe::io::write_npy(base, std::vector<std::uint64_t>{n, v}, b);
    numprobe::io::write_npy(cand, std::vector<std::uint64_t>{n, v}, c);
  }
  ~kl_files() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

TEST(cli_kl, json_has_the_contract_fields) {
  kl_files f;
  std::vector<std::int32_t> tok(64);
  for (int i = 0; i < 64; ++i) tok[i] = (i * 37) % 500;
  const auto tokens = f.path("tok.npy");
  numprobe::io::write_npy(tokens, std::vector<std::uint64_t>{64}, numprobe::io::dtype::m_i32,
                          std::as_bytes(std::span(tok)));
  const auto r = run_numprobe("kl " + f.base + " " + f.cand + " --tokens " + tokens + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["command"], "kl");
  EXPECT_EQ(j["rows"], 64);
  EXPECT_EQ(j["vocab"], 500);
  for (const char* k : {"mean", "stderr", "median", "p90", "p99", "p999", "max"})
    EXPECT_TRUE(j["kld"][k].is_number()) << k;
  const double mean = j["kld"]["mean"], p99 = j["kld"]["p99"], mx = j["kld"]["max"];
  EXPECT_GT(mean, 0.0);
  EXPECT_LE(p99, mx);
  EXPECT_LE(j["kld"]["median"].get<double>(), p99);
  const double top1 = j["top1_agreement"];
  EXPECT_GT(top1, 0.5);
  EXPECT_LE(top1, 1.0);
  EXPECT_GT(j["delta_p"]["rms"].get<double>(), 0.0);
  EXPECT_EQ(j["topk"]["k"], 10);
  EXPECT_TRUE(j["ppl"]["ratio"].is_number());
  EXPECT_EQ(j["worst"].size(), 10u);
  EXPECT_EQ(j["worst"][0]["kld"], j["kld"]["max"]);
  EXPECT_EQ(j["pass"], true);
}

TEST(cli_kl, identical_inputs_and_text_report) {
  kl_files f;
  const auto r = run_numprobe("kl " + f.base + " " + f.base);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Same top p"), std::string::npos);
  EXPECT_NE(r.out.find("100.000%"), std::string::npos);
}

TEST(cli_kl, breached_bounds_exit_1) {
  kl_files f;
  const auto r = run_numprobe("kl " + f.base + " " + f.cand +
                              " --bound 'kld.p99<=1e-9' --bound 'top1>=0.5' --json -");
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["pass"], false);
  ASSERT_EQ(j["breaches"].size(), 1u);
  EXPECT_EQ(j["breaches"][0]["bound"], "kld.p99<=1e-09");
  const auto ok = run_numprobe("kl " + f.base + " " + f.cand + " --bound 'kld.p99<=100' --bound 'top1>=0.1'");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

void expect_input_error(const kl_files& f, const std::string& args, const std::string& needle) {
  const auto r = run_numprobe(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  (void)f;
}

TEST(cli_kl, bad_inputs_exit_2) {
  kl_files f;
  // V mismatch.
  const auto v = f.path("v.npy");
  numprobe::io::write_npy(v, std::vector<std::uint64_t>{64, 499}, std::vector<float>(64 * 499, 0.f));
  expect_input_error(f, "kl " + f.base + " " + v, "vocabulary size differs");
  // Row mismatch.
  const auto n = f.path("n.npy");
  numprobe::io::write_npy(n, std::vector<std::uint64_t>{63, 500}, std::vector<float>(63 * 500, 0.f));
  expect_input_error(f, "kl " + f.base + " " + n, "shape mismatch");
  // NaN and Inf with their positions.
  std::vector<float> bad(64 * 500, 0.f);
  bad[3 * 500 + 7] = NAN;
  bad[10 * 500 + 2] = INFINITY;
  const auto nan = f.path("nan.npy");
  numprobe::io::write_npy(nan, std::vector<std::uint64_t>{64, 500}, bad);
  // NaN/Inf in the candidate is a finding (exit 1, issue 15); in the base, an input error.
  const auto finding = run_numprobe("kl " + f.base + " " + nan);
  EXPECT_EQ(finding.exit_code, 1) << finding.err;
  EXPECT_NE(finding.err.find("candidate[3, 7]=nan"), std::string::npos) << finding.err;
  EXPECT_NE(finding.err.find("2 NaN/Inf"), std::string::npos) << finding.err;
  expect_input_error(f, "kl " + nan + " " + f.base, "base[3, 7]=nan");
  // Empty file, zero rows, missing file.
  const auto empty = f.path("empty.npy");
  std::ofstream(empty).close();
  expect_input_error(f, "kl " + empty + " " + f.cand, "empty.npy");
  const auto zero = f.path("zero.npy");
  numprobe::io::write_npy(zero, std::vector<std::uint64_t>{0, 500}, std::vector<float>{});
  expect_input_error(f, "kl " + zero + " " + zero, "empty");
  expect_input_error(f, "kl " + f.path("missing.npy") + " " + f.cand, "missing.npy");
  // Unknown bound metric.
  expect_input_error(f, "kl " + f.base + " " + f.cand + " --bound 'kld.p42<=1'", "unknown kl metric");
}

TEST(cli_kl, safetensors_bf16_input) {
  kl_files f;
  const std::uint64_t n = 8, v = 32;
  std::vector<std::uint16_t> bits(n * v);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const float x = static_cast<float>(numprobe::normal_at(4, 1, i));
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    bits[i] = static_cast<std::uint16_t>(u >> 16);
  }
  numprobe::io::tensor_to_write t{"logits", numprobe::io::dtype::m_bf16, {n, v},
                                  std::as_bytes(std::span(bits))};
  const auto st = f.path("l.safetensors");
  numprobe::io::write_safetensors(st, {t});
  const auto r = run_numprobe("kl " + st + ":logits " + st + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["kld"]["max"], 0.0);
  EXPECT_EQ(j["top1_agreement"], 1.0);
  EXPECT_EQ(j["inputs"]["base_dtype"], "bf16");
}

// --positions in the JSON and the view; bad values exit 2 naming the flag; a positions bound
// gates (exit 1 on breach). kl_files' noise is flat, so its bins are a control here; the
// probe test checks growth (tests/probes/test_kl_probe.cpp).
TEST(cli_kl, positions_json_view_and_bounds) {
  kl_files f;
  const auto r = run_numprobe("kl " + f.base + " " + f.cand + " --positions 4 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  ASSERT_EQ(j["positions"]["bins"].size(), 4u);
  EXPECT_EQ(j["positions"]["bins"][3]["lo"], 48);
  EXPECT_EQ(j["positions"]["bins"][3]["hi"], 63);
  EXPECT_EQ(j["positions"]["bins"][3]["rows"], 16);
  for (const char* k : {"slope_per_1k", "log2_slope", "r2", "last_over_first", "slope_t"})
    EXPECT_TRUE(j["positions"]["fit"][k].is_number()) << k;
  EXPECT_TRUE(j["base_precision"].is_null());  // f32 base: no floor
  const auto text = run_numprobe("kl " + f.base + " " + f.cand + " --positions 4");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("KL by position"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("48..63"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("growth    KL"), std::string::npos) << text.out;
  // Last over first of flat noise is near 1: a bound at 1e-3 breaches, one at 1e3 holds.
  EXPECT_EQ(run_numprobe("kl " + f.base + " " + f.cand + " --positions 4 --bound 'positions.last_over_first<=1e-3'")
                .exit_code, 1);
  EXPECT_EQ(run_numprobe("kl " + f.base + " " + f.cand + " --positions 4 --bound 'positions.last_over_first<=1e3'")
                .exit_code, 0);
  // Two sequences of 32.
  const auto two = run_numprobe("kl " + f.base + " " + f.cand + " --positions 4 --seq-len 32 --json -");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const auto j2 = json::parse(two.out);
  EXPECT_EQ(j2["positions"]["sequences"], 2);
  EXPECT_EQ(j2["positions"]["bins"][0]["rows"], 16);
  EXPECT_EQ(j2["positions"]["bins"][3]["hi"], 31);
}

TEST(cli_kl, bad_positions_exit_2) {
  kl_files f;  // 64 rows
  const auto kl = "kl " + f.base + " " + f.cand;
  expect_input_error(f, kl + " --positions 0", "--positions");
  expect_input_error(f, kl + " --positions 65", "--positions");
  expect_input_error(f, kl + " --positions 4 --seq-len 5", "--seq-len");
  expect_input_error(f, kl + " --positions 40 --seq-len 32", "--positions");
  expect_input_error(f, kl + " --positions 4 --seq-len 0", "--seq-len");
  expect_input_error(f, kl + " --bound 'positions.r2<=1'", "--positions");
  expect_input_error(f, kl + " --positions 4 --bound 'positions.nope<=1'", "unknown kl metric");
  expect_input_error(f, kl + " --bound 'base_precision.floor_kld_mean<=1'", "bf16 or f16 base");
}

// A bf16 base that is exactly the f32 candidate rounded: the measured KL is the floor, and the
// view says so.
TEST(cli_kl, bf16_base_states_its_floor) {
  kl_files f;
  const std::uint64_t n = 16, v = 300;
  std::vector<float> c(n * v);
  std::vector<std::uint16_t> bits(n * v);
  for (std::size_t i = 0; i < c.size(); ++i) {
    c[i] = static_cast<float>(20.0 + 2.0 * numprobe::normal_at(4, 2, i));
    std::uint32_t u;
    std::memcpy(&u, &c[i], 4);
    bits[i] = static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // RNE
  }
  numprobe::io::tensor_to_write t{"logits", numprobe::io::dtype::m_bf16, {n, v}, std::as_bytes(std::span(bits))};
  const auto st = f.path("b.safetensors"), cn = f.path("c.npy");
  numprobe::io::write_safetensors(st, {t});
  numprobe::io::write_npy(cn, std::vector<std::uint64_t>{n, v}, c);
  const auto r = run_numprobe("kl " + st + " " + cn + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["base_precision"]["format"], "bf16");
  EXPECT_EQ(j["base_precision"]["at_floor"], true);
  const double floor = j["base_precision"]["floor_kld_mean"];
  EXPECT_GT(floor, 0.0);
  EXPECT_EQ(j["kld"]["mean"].get<double>(), floor);  // the same rows, the same arithmetic
  const auto text = run_numprobe("kl " + st + " " + cn);
  EXPECT_NE(text.out.find("floor     bf16 base logits"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("at the floor"), std::string::npos) << text.out;
  // mean_over_floor is 1 here: a bound below it breaches.
  EXPECT_EQ(run_numprobe("kl " + st + " " + cn + " --bound 'base_precision.mean_over_floor>=2'").exit_code, 1);
}

}  // namespace
