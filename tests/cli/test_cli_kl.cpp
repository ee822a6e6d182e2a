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

#include "numprobe/core/rng.hpp"
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

}  // namespace
