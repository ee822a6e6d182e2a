// The kl probe end to end on .npy files: any thread count and any row-block size give the
// same report bit for bit (per-row results do not depend on the decomposition); f32 rows read
// in place equal the same values stored as f64; the probe's per-row KL equals compare_row on
// the rows; a NaN is an input error naming its position.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "numprobe/core/error.hpp"
#include "numprobe/core/rng.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/metrics/kl.hpp"
#include "probes/kl_probe.hpp"

namespace {

namespace fs = std::filesystem;
using numprobe::probes::kl_probe_options;
using numprobe::probes::run_kl;

constexpr std::uint64_t k_n = 37, k_v = 1000 + 3;  // ragged against chunks and blocks

struct files {
  fs::path dir;
  files() {
    dir = fs::temp_directory_path() / ("numprobe_test_kl_probe_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~files() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

void make(std::vector<float>& b, std::vector<float>& c) {
  b.resize(k_n * k_v);
  c.resize(k_n * k_v);
  for (std::uint64_t i = 0; i < b.size(); ++i) {
    const double spread = (i / k_v) % 6 == 4 ? 2e3 : 4.0;
    b[i] = static_cast<float>(spread * numprobe::normal_at(5, 1, i));
    c[i] = static_cast<float>(b[i] + 0.1 * numprobe::normal_at(5, 2, i));
  }
}

nlohmann::json report(const std::string& base, const std::string& cand, unsigned threads,
                      std::int64_t block) {
  kl_probe_options o;
  o.base = base;
  o.cand = cand;
  o.threads = threads;
  o.block_rows = block;
  o.worst = k_n;  // every row's KL, in order of size
  auto j = numprobe::probes::to_json(run_kl(o));
  j.erase("seconds");
  j.erase("inputs");
  return j;
}

TEST(kl_probe, same_report_for_any_thread_count_and_block_size) {
  files f;
  std::vector<float> b, c;
  make(b, c);
  const std::vector<std::uint64_t> shape{k_n, k_v};
  numprobe::io::write_npy(f.path("b.npy"), shape, b);
  numprobe::io::write_npy(f.path("c.npy"), shape, c);
  const auto one = report(f.path("b.npy"), f.path("c.npy"), 1, 0);
  for (unsigned t : {1u, 2u, 3u})
    for (std::int64_t blk : {1, 4, 0}) {
      const auto j = report(f.path("b.npy"), f.path("c.npy"), t, blk);
      EXPECT_EQ(j.dump(), one.dump()) << "threads " << t << " block " << blk;
    }
  // f64 files holding the same values take the f64 path: the same report.
  numprobe::io::write_npy(f.path("b64.npy"), shape, std::vector<double>(b.begin(), b.end()));
  numprobe::io::write_npy(f.path("c64.npy"), shape, std::vector<double>(c.begin(), c.end()));
  auto j64 = report(f.path("b64.npy"), f.path("c64.npy"), 2, 0);
  auto j32 = one;
  for (auto* j : {&j64, &j32}) j->erase("case");  // names the dtypes
  EXPECT_EQ(j64.dump(), j32.dump());
  // Each listed row's KL is compare_row's on that row (the double overload, widened rows).
  numprobe::metrics::kl_scratch s;
  ASSERT_EQ(one["worst"].size(), k_n);
  for (const auto& w : one["worst"]) {
    const auto r = w["row"].get<std::uint64_t>();
    const std::vector<double> rb(b.begin() + r * k_v, b.begin() + (r + 1) * k_v);
    const std::vector<double> rc(c.begin() + r * k_v, c.begin() + (r + 1) * k_v);
    EXPECT_EQ(w["kld"].get<double>(), numprobe::metrics::compare_row(rb, rc, 10, -1, s).kld);
  }
}

// NaN in the candidate is a finding (exit 1); in the base an input error (exit 2).
TEST(kl_probe, nan_is_reported_with_its_position) {
  files f;
  std::vector<float> b, c;
  make(b, c);
  c[20 * k_v + 999] = std::nanf("");
  const std::vector<std::uint64_t> shape{k_n, k_v};
  numprobe::io::write_npy(f.path("b.npy"), shape, b);
  numprobe::io::write_npy(f.path("c.npy"), shape, c);
  for (unsigned t : {1u, 2u}) {
    try {
      (void)report(f.path("b.npy"), f.path("c.npy"), t, 3);
      FAIL() << "expected a finding";
    } catch (const numprobe::error& e) {
      EXPECT_EQ(e.code(), numprobe::exit_code::m_breach);
      EXPECT_NE(std::string(e.what()).find("candidate[20, 999]=nan"), std::string::npos) << e.what();
    }
    try {
      (void)report(f.path("c.npy"), f.path("b.npy"), t, 3);
      FAIL() << "expected an input error";
    } catch (const numprobe::error& e) {
      EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
      EXPECT_NE(std::string(e.what()).find("base[20, 999]=nan"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
