// The kl probe end to end on .npy files: any thread count and any row-block size give the
// same report bit for bit (per-row results do not depend on the decomposition); f32 rows read
// in place equal the same values stored as f64; the probe's per-row KL equals compare_row on
// the rows; a NaN is an input error naming its position. KL by position (--positions,
// --seq-len): bins and their growth fit on noise that grows with position, against a
// flat-noise control; the 16-bit base's precision floor against an independent rounding loop.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/io/safetensors.hpp"
#include "numprobe/metrics/kl.hpp"
#include "probes/kl/kl_probe.hpp"

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

// --- KL by position ---------------------------------------------------------------------

// Logits [rows, v]: base = spread * normal; candidate = base + sigma(position) * normal, with
// position = row % seq (seq = rows for one sequence).
void make_noisy(std::uint64_t rows, std::uint64_t v, std::uint64_t seq, double spread,
                double (*sigma)(double frac), std::vector<float>& b, std::vector<float>& c) {
  b.resize(rows * v);
  c.resize(rows * v);
  for (std::uint64_t i = 0; i < b.size(); ++i) {
    const double frac = static_cast<double>((i / v) % seq) / static_cast<double>(seq);
    b[i] = static_cast<float>(spread * numprobe::normal_at(11, 1, i));
    c[i] = static_cast<float>(b[i] + sigma(frac) * numprobe::normal_at(11, 2, i));
  }
}

// Writes the pair as .npy files and returns options that read them.
kl_probe_options write_pair(const files& f, std::uint64_t rows, std::uint64_t v, const std::vector<float>& b,
                            const std::vector<float>& c) {
  const std::vector<std::uint64_t> shape{rows, v};
  numprobe::io::write_npy(f.path("pb.npy"), shape, b);
  numprobe::io::write_npy(f.path("pc.npy"), shape, c);
  kl_probe_options o;
  o.base = f.path("pb.npy");
  o.cand = f.path("pc.npy");
  return o;
}

numprobe::probes::kl_report positions_report(const files& f, std::uint64_t rows, std::uint64_t v,
                                             const std::vector<float>& b, const std::vector<float>& c,
                                             std::int64_t bins, std::int64_t seq_len) {
  auto o = write_pair(f, rows, v, b, c);
  o.threads = 2;
  o.block_rows = 7;  // blocks straddle bin edges
  o.worst = rows;    // every row's KL, to recompute the bins here
  o.positions = bins;
  o.seq_len = seq_len;
  return run_kl(o);
}

// Each bin's mean and p99 recomputed from the per-row KL (the worst[] list holds every row):
// a plain mean (the probe's is compensated: they agree to n * 2^-53 relative, 1e-12 is above
// that for n <= 1000) and llama.cpp's interpolated p99 by sorting: h = 0.99 (n - 1),
// (1 - f) v[i] + f v[i + 1] with i = floor(h), f = h - i (the same operations: exact).
void expect_bins_match_rows(const numprobe::probes::kl_report& r, std::int64_t period) {
  std::vector<double> kld(static_cast<std::size_t>(r.summary.rows));
  for (const auto& w : r.summary.worst) kld[static_cast<std::size_t>(w.row)] = w.kld;
  std::int64_t next_lo = 0, total = 0;
  for (const auto& bin : r.positions.bins) {
    EXPECT_EQ(bin.lo, next_lo);
    next_lo = bin.hi + 1;
    std::vector<double> v;
    for (std::int64_t row = 0; row < r.summary.rows; ++row)
      if (row % period >= bin.lo && row % period <= bin.hi) v.push_back(kld[static_cast<std::size_t>(row)]);
    ASSERT_EQ(bin.rows, static_cast<std::int64_t>(v.size()));
    total += bin.rows;
    double sum = 0.0;
    for (double x : v) sum += x;
    EXPECT_NEAR(bin.kld_mean, sum / static_cast<double>(v.size()), 1e-12 * std::abs(bin.kld_mean));
    std::sort(v.begin(), v.end());
    const double h = 0.99 * static_cast<double>(v.size() - 1);
    const auto i = static_cast<std::size_t>(h);
    const double frac = h - static_cast<double>(i);
    // Linear interpolation between the order statistics (numpy's default). Equal up to how the
    // compiler contracts the two products and the sum (an FMA or not: -O1 here, -O3 in the
    // library): two roundings of a value between v[i] and v[i+1], at most 2 ulp of it.
    const double p99 = (1.0 - frac) * v[i] + frac * v[std::min(i + 1, v.size() - 1)];
    EXPECT_NEAR(bin.kld_p99, p99, 4 * std::numeric_limits<double>::epsilon() * std::abs(p99));
  }
  EXPECT_EQ(next_lo, period);
  EXPECT_EQ(total, r.summary.rows);
}

double growing_sigma(double frac) { return 0.02 + 0.2 * frac; }
double flat_sigma(double) { return 0.1; }

// Noise sigma growing linearly with position: KL ~= sigma^2 / 2 * (1 - sum p^2) grows
// quadratically, so adjacent bins' means rise by 25% or more, and every rise must exceed 3
// standard errors of the difference (the bins resolve it, it is not luck of the seed). A
// linear fit to a quadratic on a uniform grid has r2 >= 15/16 (y = x^2 on [0, 1]); 0.9 leaves
// room for the noise.
TEST(kl_probe, positions_show_noise_that_grows_with_position) {
  files f;
  const std::uint64_t rows = 1000, v = 257;  // 1000 rows in 8 bins of 125; V crosses 256
  std::vector<float> b, c;
  make_noisy(rows, v, rows, 1.0, growing_sigma, b, c);
  const auto r = positions_report(f, rows, v, b, c, 8, 0);
  ASSERT_EQ(r.positions.bins.size(), 8u);
  expect_bins_match_rows(r, static_cast<std::int64_t>(rows));
  const auto& bins = r.positions.bins;
  for (std::size_t i = 1; i < bins.size(); ++i) {
    const double se = std::hypot(bins[i].kld_stderr, bins[i - 1].kld_stderr);
    EXPECT_GT(bins[i].kld_mean - bins[i - 1].kld_mean, 3.0 * se) << "bin " << i;
  }
  const auto& fit = r.positions.fit;
  EXPECT_GT(fit.slope_per_1k, 0.0);
  EXPECT_GT(fit.log2_slope, 0.0);
  EXPECT_GT(fit.r2, 0.9);
  EXPECT_GE(fit.slope_t, 3.0);
  EXPECT_TRUE(fit.grows);
  // sigma grows 0.0325 -> 0.1975 from the first bin's centre to the last's: (0.1975/0.0325)^2
  // ~= 37 in KL; the ratio must show most of it (a factor 2 either way for the (1 - sum p^2)
  // factor and the noise).
  EXPECT_GT(fit.last_over_first, 37.0 / 2);
  EXPECT_LT(fit.last_over_first, 37.0 * 2);
  EXPECT_EQ(numprobe::probes::kl_report_metric(r, "positions.last_over_first"), fit.last_over_first);
  const auto j = numprobe::probes::to_json(r);
  EXPECT_EQ(j["positions"]["bins"].size(), 8u);
  EXPECT_EQ(j["positions"]["bins"][0]["hi"], 124);
  EXPECT_EQ(j["positions"]["fit"]["grows"], true);
  EXPECT_NE(r.case_id.find(",positions=8"), std::string::npos) << r.case_id;
}

// Flat noise: the bin means differ only by sampling noise. Under that null the slope's t
// statistic is Student-t with B - 2 = 14 degrees of freedom (P(|t| >= 3) ~= 0.01) and r2 is
// Beta(1/2, 7) with mean 1/15 (P(r2 >= 0.5) < 0.005); the seed is fixed, so these are checks
// of the fit, not a pass rate.
TEST(kl_probe, positions_flat_noise_does_not_grow) {
  files f;
  const std::uint64_t rows = 1000, v = 257;
  std::vector<float> b, c;
  make_noisy(rows, v, rows, 1.0, flat_sigma, b, c);
  const auto r = positions_report(f, rows, v, b, c, 16, 0);  // 1000 / 16: bins of 62 and 63
  ASSERT_EQ(r.positions.bins.size(), 16u);
  expect_bins_match_rows(r, static_cast<std::int64_t>(rows));
  const auto& fit = r.positions.fit;
  EXPECT_LT(std::abs(fit.slope_t), 3.0);
  EXPECT_LT(fit.r2, 0.5);
  EXPECT_FALSE(fit.grows);
  // The KL rise the slope predicts across all positions is below 10% of the mean KL.
  EXPECT_LT(std::abs(fit.slope_per_1k) * 1.0, 0.1 * r.summary.kld.mean);
}

// Two sequences of 300 positions: row r is position r % 300, each bin holds both sequences'
// rows, and the growth within a sequence shows (without --seq-len it would be a sawtooth).
TEST(kl_probe, positions_with_seq_len_pool_the_sequences) {
  files f;
  const std::uint64_t seq = 300, rows = 2 * seq, v = 129;
  std::vector<float> b, c;
  make_noisy(rows, v, seq, 1.0, growing_sigma, b, c);
  const auto r = positions_report(f, rows, v, b, c, 5, static_cast<std::int64_t>(seq));
  ASSERT_EQ(r.positions.bins.size(), 5u);
  EXPECT_EQ(r.positions.sequences, 2);
  expect_bins_match_rows(r, static_cast<std::int64_t>(seq));
  for (const auto& bin : r.positions.bins) EXPECT_EQ(bin.rows, 2 * 60);
  EXPECT_EQ(r.positions.bins.back().hi, 299);
  for (std::size_t i = 1; i < r.positions.bins.size(); ++i)
    EXPECT_GT(r.positions.bins[i].kld_mean, r.positions.bins[i - 1].kld_mean) << "bin " << i;
  EXPECT_TRUE(r.positions.fit.grows);
}

void expect_flag_error(const kl_probe_options& o, const std::string& flag) {
  try {
    (void)run_kl(o);
    FAIL() << "expected an input error naming " << flag;
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
  }
}

TEST(kl_probe, bad_positions_and_seq_len_are_input_errors) {
  files f;
  std::vector<float> b, c;
  make(b, c);  // 37 rows
  auto o = write_pair(f, k_n, k_v, b, c);
  o.positions = 38;  // more bins than rows
  expect_flag_error(o, "--positions");
  o.positions = -1;
  expect_flag_error(o, "--positions");
  o.positions = 2;
  o.seq_len = 5;  // 37 rows are not sequences of 5
  expect_flag_error(o, "--seq-len");
  o.positions = 0;
  o.seq_len = 37;  // --seq-len without --positions
  expect_flag_error(o, "--seq-len");
  o.positions = 0;
  o.seq_len = 0;
  o.bounds.push_back(numprobe::parse_bound("positions.r2<=1"));  // positions.* needs --positions
  expect_flag_error(o, "--positions");
  o.positions = 37;  // exactly one position per bin is allowed
  EXPECT_EQ(run_kl(o).positions.bins.size(), 37u);
}

// --- the 16-bit base's precision floor ---------------------------------------------------

// bf16 round to nearest even on the float's bits (finite values far from overflow): written
// here independently of the formats library.
float bf16_rne(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

// Textbook KL(p || q) of two logit rows in long double.
double naive_kl(const std::vector<double>& a, const std::vector<double>& b) {
  const auto lse = [](const std::vector<double>& x) {
    const long double m = *std::max_element(x.begin(), x.end());
    long double s = 0;
    for (double v : x) s += std::exp(static_cast<long double>(v) - m);
    return m + std::log(s);
  };
  const long double la = lse(a), lb = lse(b);
  long double kl = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const long double lp = a[i] - la, lq = b[i] - lb;
    kl += std::exp(lp) * (lp - lq);
  }
  return static_cast<double>(kl);
}

// Logits near 20 (bf16 ulp 2^-3 in [16, 32)), so the floor is in llama.cpp's 1e-4 range.
std::vector<float> big_logits() {
  std::vector<float> c(k_n * k_v);
  for (std::uint64_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(20.0 + 2.0 * numprobe::normal_at(13, 1, i));
  return c;
}

TEST(kl_probe, bf16_base_floor_matches_an_independent_rounding) {
  files f;
  const auto c = big_logits();
  std::vector<std::uint16_t> bits(c.size());
  double expected = 0.0, second_order = 0.0;
  for (std::uint64_t r = 0; r < k_n; ++r) {
    std::vector<double> x(k_v), xr(k_v);
    for (std::uint64_t i = 0; i < k_v; ++i) {
      x[i] = c[r * k_v + i];
      xr[i] = bf16_rne(c[r * k_v + i]);
      std::uint32_t u;
      const float y = static_cast<float>(xr[i]);
      std::memcpy(&u, &y, 4);
      bits[r * k_v + i] = static_cast<std::uint16_t>(u >> 16);
    }
    expected += naive_kl(xr, x) / static_cast<double>(k_n);
    // 1/2 sum p (1 - p) ulp^2 / 12, the second-order estimate (kl_precision_floor.hpp).
    const double m = *std::max_element(x.begin(), x.end());
    double z = 0.0;
    for (double xi : x) z += std::exp(xi - m);
    for (double xi : x) {
      const double p = std::exp(xi - m) / z;
      const double ulp = std::ldexp(1.0, std::ilogb(xi) - 7);
      second_order += 0.5 * p * (1 - p) * ulp * ulp / 12.0 / static_cast<double>(k_n);
    }
  }
  numprobe::io::tensor_to_write t{"logits", numprobe::io::dtype::m_bf16, {k_n, k_v}, std::as_bytes(std::span(bits))};
  numprobe::io::write_safetensors(f.path("b.safetensors"), {t});
  numprobe::io::write_npy(f.path("c.npy"), std::vector<std::uint64_t>{k_n, k_v}, c);
  kl_probe_options o;
  o.base = f.path("b.safetensors") + ":logits";
  o.cand = f.path("c.npy");
  o.threads = 2;
  o.block_rows = 4;
  const auto r = run_kl(o);
  const auto& p = r.base_precision;
  ASSERT_TRUE(p.measured) << p.basis;
  EXPECT_EQ(p.format, "bf16");
  EXPECT_EQ(p.rows_sampled, static_cast<std::int64_t>(k_n));  // 37 x 1003 values: every row
  // Same quantity, both in (at least) double: the probe's rearranged KL cancels two terms
  // about 1e2 times the result, so its relative error is below 1e2 * V * 2^-53 ~= 1e-11.
  EXPECT_NEAR(p.floor_kld_mean, expected, 1e-9 * expected);
  // The uniform-rounding model: sampling noise of ~37k roundings (a few %) plus the third-order
  // term (relative size ~ ulp/2 = 6%): within a factor 1.25.
  EXPECT_GT(p.floor_kld_mean, second_order / 1.25);
  EXPECT_LT(p.floor_kld_mean, second_order * 1.25);
  EXPECT_GT(p.floor_kld_mean, 1e-5);  // the order llama.cpp meets with 16-bit base logits
  // The base is exactly round_bf16(candidate): the measured KL is the floor itself.
  EXPECT_NEAR(r.summary.kld.mean, p.floor_kld_mean, 1e-9 * expected);
  EXPECT_TRUE(p.at_floor);
  const auto j = numprobe::probes::to_json(r);
  EXPECT_EQ(j["base_precision"]["format"], "bf16");
  EXPECT_EQ(j["base_precision"]["at_floor"], true);
}

// f16 has 3 more mantissa bits than bf16 and the same ulp ratio (2^3) at every magnitude in
// its normal range, so its floor is 2^6 = 64 times smaller (the second-order estimate scales
// with ulp^2; the realised roundings differ, within the factor 1.25 above). A 16-bit candidate
// has no wider logits to round: no floor, said so. An f32 base has none at all.
TEST(kl_probe, f16_floor_is_64_times_smaller_and_16_bit_candidates_have_none) {
  files f;
  const auto c = big_logits();
  std::vector<std::uint16_t> f16(c.size()), bf(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) {
    f16[i] = static_cast<std::uint16_t>(numprobe::formats::encode(numprobe::formats::format_id::m_f16, c[i]));
    bf[i] = static_cast<std::uint16_t>(numprobe::formats::encode(numprobe::formats::format_id::m_bf16, c[i]));
  }
  const std::vector<std::uint64_t> shape{k_n, k_v};
  numprobe::io::write_npy(f.path("b16.npy"), shape, numprobe::io::dtype::m_f16, std::as_bytes(std::span(f16)));
  numprobe::io::write_npy(f.path("c.npy"), shape, c);
  numprobe::io::tensor_to_write t{"logits", numprobe::io::dtype::m_bf16, shape, std::as_bytes(std::span(bf))};
  numprobe::io::write_safetensors(f.path("bf.safetensors"), {t});
  kl_probe_options o;
  o.cand = f.path("c.npy");
  o.base = f.path("b16.npy");
  const auto rf = run_kl(o);
  o.base = f.path("bf.safetensors");
  const auto rb = run_kl(o);
  ASSERT_TRUE(rf.base_precision.measured);
  EXPECT_EQ(rf.base_precision.format, "f16");
  const double ratio = rb.base_precision.floor_kld_mean / rf.base_precision.floor_kld_mean;
  EXPECT_GT(ratio, 64.0 / 1.25);
  EXPECT_LT(ratio, 64.0 * 1.25);
  o.cand = f.path("bf.safetensors");
  o.base = f.path("b16.npy");
  const auto none = run_kl(o);
  EXPECT_FALSE(none.base_precision.measured);
  EXPECT_NE(none.base_precision.basis.find("candidate is bf16"), std::string::npos);
  o.bounds.push_back(numprobe::parse_bound("base_precision.mean_over_floor<=10"));
  expect_flag_error(o, "--bound");
  o.bounds.clear();
  o.base = f.path("c.npy");
  EXPECT_TRUE(numprobe::probes::to_json(run_kl(o))["base_precision"].is_null());
}

}  // namespace
