// The kl check runner: gates on the KL statistics of two logit files, checked against a plain
// double-precision KL computed here, and file errors reported as input errors of the check.
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <random>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "numprobe/io/npy.hpp"
#include "src/scenario/run_scenario.hpp"

namespace sc = numprobe::scenario;
using numprobe::result::status;

namespace {

// Plain two-pass log-softmax in double.
std::vector<double> log_softmax(const float* z, std::size_t v) {
  double m = -INFINITY;
  for (std::size_t i = 0; i < v; ++i) m = std::max(m, static_cast<double>(z[i]));
  double s = 0;
  for (std::size_t i = 0; i < v; ++i) s += std::exp(static_cast<double>(z[i]) - m);
  std::vector<double> out(v);
  for (std::size_t i = 0; i < v; ++i) out[i] = static_cast<double>(z[i]) - m - std::log(s);
  return out;
}

}  // namespace

TEST(kl_runner, gates_on_kl_statistics_of_two_files) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("np_kl_runner_{}", ::getpid());
  std::filesystem::create_directories(dir);
  constexpr std::size_t n = 37, v = 3001;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> z(0.f, 3.f), noise(0.f, 0.05f);
  std::vector<float> base(n * v), cand(n * v);
  for (std::size_t i = 0; i < n * v; ++i) {
    base[i] = z(rng);
    cand[i] = base[i] + noise(rng);
  }
  const std::vector<std::uint64_t> shape{n, v};
  numprobe::io::write_npy(dir / "base.npy", shape, base);
  numprobe::io::write_npy(dir / "cand.npy", shape, cand);
  double kl_sum = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const auto p = log_softmax(base.data() + r * v, v), q = log_softmax(cand.data() + r * v, v);
    for (std::size_t i = 0; i < v; ++i) kl_sum += std::exp(p[i]) * (p[i] - q[i]);
  }
  const double kl_mean = kl_sum / n;

  const auto text = fmt::format(R"(
[[check]]
name = "kl-pass"
probe = "kl"
base = "{0}/base.npy"
cand = "{0}/cand.npy"
bounds = ["kld.mean<=1", "top1>=0.5"]

[[check]]
name = "kl-breach"
probe = "kl"
base = "{0}/base.npy"
cand = "{0}/cand.npy"
bound = "kld.p99<=1e-9"

[[check]]
name = "kl-missing"
probe = "kl"
base = "{0}/base.npy"
cand = "{0}/nope.npy"

[[check]]
name = "kl-positions"
probe = "kl"
base = "{0}/base.npy"
cand = "{0}/cand.npy"
positions = 4
bound = "positions.last_over_first<=1e-9"

[[check]]
name = "kl-positions-zero"
probe = "kl"
base = "{0}/base.npy"
cand = "{0}/cand.npy"
positions = 0
)", dir.string());
  const auto r = sc::run_scenario(sc::parse_scenario(text, "kl.toml"), {});
  ASSERT_EQ(r.checks.size(), 5u);
  // KL by position through the scenario key: flat noise, so the last bin's mean over the
  // first's is near 1 (each bin averages ~9 rows of 3001 iid terms: a few % spread), and the
  // impossible bound fails on it.
  ASSERT_EQ(r.checks[3].outcome, status::m_fail) << r.checks[3].message;
  ASSERT_EQ(r.checks[3].gates.size(), 1u);
  EXPECT_GT(r.checks[3].gates[0].measured, 0.8);
  EXPECT_LT(r.checks[3].gates[0].measured, 1.25);
  EXPECT_EQ(r.checks[4].outcome, status::m_error);
  EXPECT_EQ(r.checks[4].error_code, 2);
  EXPECT_NE(r.checks[4].message.find("positions"), std::string::npos) << r.checks[4].message;
  const auto& ok = r.checks[0];
  ASSERT_EQ(ok.outcome, status::m_pass) << ok.message;
  const auto* m = ok.find_metric("kld.mean");
  ASSERT_NE(m, nullptr);
  // Both sides sum n*v terms in double: 1e-9 relative is far above their roundoff (~v*u).
  EXPECT_NEAR(m->value, kl_mean, 1e-9 * kl_mean);
  EXPECT_GT(kl_mean, 1e-5);  // the noise moved the distributions: the gate below must see it
  EXPECT_EQ(r.checks[1].outcome, status::m_fail);
  ASSERT_EQ(r.checks[1].gates.size(), 1u);
  EXPECT_GT(r.checks[1].gates[0].measured, 1e-9);
  EXPECT_EQ(r.checks[2].outcome, status::m_error);
  EXPECT_EQ(r.checks[2].error_code, 2);
  EXPECT_NE(r.checks[2].message.find("nope.npy"), std::string::npos) << r.checks[2].message;
  std::filesystem::remove_all(dir);
}

TEST(kl_runner, unknown_metric_and_missing_files_are_input_errors) {
  EXPECT_THROW((void)sc::parse_scenario("[[check]]\nname='a'\nprobe='kl'\nbase='x'\ncand='y'\nbound='rel_rms<=1'\n",
                                        "k.toml"),
               numprobe::error);
  const auto r = sc::run_scenario(sc::parse_scenario("[[check]]\nname='a'\nprobe='kl'\nbase='x.npy'\n", "k.toml"), {});
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].outcome, status::m_error);
  EXPECT_EQ(r.checks[0].error_code, 2);
  EXPECT_NE(r.checks[0].message.find("cand"), std::string::npos) << r.checks[0].message;
}
