// scan --rank-by (issue 17): issue 17's outlier-channel example (four input channels x60 among
// normal tensors) ranks last by SQNR and first by the default; a crafted checkpoint on which
// every key's order differs; the bulk bound and bulk error against a brute-force sort and a
// whole-tensor quantize(), on the fused and the quantize()-based paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/io/safetensors.hpp"
#include "probes/scan/scan_probe.hpp"

namespace {

namespace fs = std::filesystem;
using namespace numprobe;

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("numprobe_test_scan_rank_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
};

std::vector<std::string> order(const probes::scan_report& r) {
  std::vector<std::string> out;
  for (const auto& t : r.tensors) out.push_back(t.name);
  return out;
}

probes::scan_report scan(const fs::path& ck, probes::scan_rank k, std::vector<std::string> schemes = {"nvfp4"}) {
  probes::scan_options o;
  o.checkpoint = ck.string();
  o.schemes = std::move(schemes);
  o.rank_by = k;
  return probes::run_scan(o);
}

std::string layer(int i) { return "model.layers." + std::to_string(i) + ".mlp.up_proj.weight"; }

// Issue 17's example: 256 x 256 N(0,1) weights; tensor 2 has four outlier input channels (columns,
// in four different 16-wide NVFP4 blocks) scaled by 60.
constexpr std::int64_t k_n = 256, k_outlier_tensor = 2;
constexpr std::int64_t k_outlier_cols[] = {3, 70, 141, 200};

std::vector<float> gaussian(std::uint64_t seed, bool outliers) {
  std::vector<float> v(k_n * k_n);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(normal_at(seed, 0, i));
  if (outliers)
    for (std::int64_t r = 0; r < k_n; ++r)
      for (auto c : k_outlier_cols) v[static_cast<std::size_t>(r * k_n + c)] *= 60.0f;
  return v;
}

struct issue_example {
  temp_dir dir;
  fs::path ck = dir.path / "model.safetensors";
  std::vector<std::vector<float>> w;
  issue_example() {
    std::vector<io::tensor_to_write> ts;
    for (int i = 0; i < 5; ++i) w.push_back(gaussian(100 + i, i == k_outlier_tensor));
    for (int i = 0; i < 5; ++i) ts.push_back(io::tensor_of(layer(i), {k_n, k_n}, w[i]));
    io::write_safetensors(ck, ts);
  }
};

TEST(scan_rank, issue_example_outlier_channels_rank_last_by_sqnr_first_by_default) {
  issue_example ex;
  const auto outlier = layer(k_outlier_tensor);
  const auto by_sqnr = scan(ex.ck, probes::scan_rank::m_sqnr);
  ASSERT_EQ(by_sqnr.tensors.size(), 5u);
  EXPECT_EQ(by_sqnr.tensors.back().name, outlier);  // the issue's observation: SQNR hides it
  // It flushes about 3.4x as many elements as its neighbours (the issue: 15048 against ~4500).
  double neighbours = 0.0;
  std::int64_t flushed = 0;
  for (const auto& t : by_sqnr.tensors)
    if (t.name == outlier) flushed = t.results[0].flushed;
    else neighbours += static_cast<double>(t.results[0].flushed) / 4.0;
  std::printf("outlier tensor flushes %lld, neighbours %.0f on average (x%.2f)\n", static_cast<long long>(flushed),
              neighbours, static_cast<double>(flushed) / neighbours);
  EXPECT_GT(static_cast<double>(flushed) / neighbours, 2.5);
  EXPECT_LT(static_cast<double>(flushed) / neighbours, 4.5);

  probes::scan_options defaults;
  EXPECT_EQ(defaults.rank_by, probes::scan_rank::m_bulk);
  for (auto k : {defaults.rank_by, probes::scan_rank::m_flushed, probes::scan_rank::m_outlier}) {
    const auto r = scan(ex.ck, k);
    EXPECT_EQ(r.tensors.front().name, outlier) << probes::name(k);
    const auto& p = r.tensors.front().results[0];
    // Clearly apart, not by a hair: the bulk loses several times its neighbours' error.
    EXPECT_GT(probes::rank_value(p, k), 2.0 * probes::rank_value(r.tensors[1].results[0], k)) << probes::name(k);
  }
  // output ranks as sqnr does (isotropic activations: E|dW x|^2 / E|W x|^2 = rel_rms^2).
  EXPECT_EQ(order(scan(ex.ck, probes::scan_rank::m_output)), order(by_sqnr));
}

// The bulk bound and the bulk error, recomputed by brute force: sort |x| over the sampled rows
// (every `step`-th), take the nearest-rank p90 truncated to bfloat16, and sum over |x| below it
// in the same rows against quantize() of the whole tensor.
void expect_bulk_matches_brute_force(const probes::scan_tensor& t, const std::vector<float>& w,
                                     const std::string& scheme, std::int64_t step) {
  std::vector<double> a;
  for (std::int64_t r = 0; r < t.rows; r += step)
    for (std::int64_t c = 0; c < t.cols; ++c) a.push_back(std::fabs(w[static_cast<std::size_t>(r * t.cols + c)]));
  std::sort(a.begin(), a.end());
  const auto rank = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(a.size())));
  const float v = static_cast<float>(a[rank - 1]);  // the f32 inputs are exact in float
  const double bound = static_cast<double>(std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0xffff0000u));
  EXPECT_EQ(t.bulk_below, bound);
  std::vector<double> x(w.begin(), w.end());
  const auto q = formats::quantize(formats::find_scheme(scheme, "x").defaults, x, t.rows, t.cols);
  double sx = 0.0, se = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i)  // over the sampled rows (NVFP4, AWQ: 1-row strips)
    if (std::fabs(x[i]) < bound && (static_cast<std::int64_t>(i) / t.cols) % step == 0) {
      sx += x[i] * x[i];
      se += (q.dequant[i] - x[i]) * (q.dequant[i] - x[i]);
    }
  const auto& r = t.results[0];
  EXPECT_NEAR(r.bulk_sum_sq, sx, 1e-12 * sx) << scheme;
  EXPECT_NEAR(r.bulk_sum_sq_err, se, 1e-12 * se) << scheme;
  EXPECT_NEAR(r.bulk_rel_rms, std::sqrt(se / sx), 1e-12 * std::sqrt(se / sx)) << scheme;
  const auto elements = static_cast<double>(x.size());
  EXPECT_EQ(r.flushed_frac, static_cast<double>(r.flushed) / elements);
  EXPECT_EQ(r.outlier_flushed_frac, static_cast<double>(r.outlier_flushed) / elements);
}

TEST(scan_rank, bulk_bound_and_error_match_brute_force_on_both_paths) {
  issue_example ex;
  // nvfp4: the fused quantizer; int4-awq (zero points): the quantize()-based path. 65536
  // elements: every row is sampled.
  for (const std::string scheme : {"nvfp4", "int4-awq"}) {
    const auto r = scan(ex.ck, probes::scan_rank::m_bulk, {scheme});
    for (const auto& t : r.tensors)
      expect_bulk_matches_brute_force(t, ex.w[static_cast<std::size_t>(t.name[13] - '0')], scheme, 1);
  }
}

TEST(scan_rank, large_tensors_take_the_bound_from_every_sth_row) {
  temp_dir dir;
  constexpr std::int64_t rows = 600, cols = 1024;  // 614400 elements: s = 2, the even rows
  std::vector<float> w(rows * cols);
  for (std::size_t i = 0; i < w.size(); ++i)  // odd rows 4x larger: a bound from all rows would differ
    w[i] = static_cast<float>(normal_at(7, 0, i) * ((i / cols) % 2 ? 4.0 : 1.0));
  const auto ck = dir.path / "big.safetensors";
  io::write_safetensors(ck, {io::tensor_of("w", {rows, cols}, w)});
  const auto r = scan(ck, probes::scan_rank::m_bulk);
  expect_bulk_matches_brute_force(r.tensors.at(0), w, "nvfp4", 2);
}

// Four 16 x 64 tensors of exact NVFP4 values (every 16-wide block holds a +-1, so the block scale
// is 1/6 up to s_t's fp32 rounding and 1, 0.5, 0.25 code exactly; 1/24 is the flush threshold)
// plus one designed loss each:
//   S  15 x 0.83 per block (codes to 4/6): the worst SQNR, nothing flushed, empty bulk
//      (0.83 is the p90 itself);
//   F  two 1s, three 0.5s, eleven 0.01s (flushed whatever the block maximum: no outlier flushes);
//   O  every other block one 1 and fifteen 0.03s (outlier flushes: with the scale of 0.03 they
//      would survive), the others four 1s and twelve 0.5s;
//   B  two 1s and fourteen 0.06s (code to 1/12, 39% off, not flushed): the worst bulk.
// Hand-derived orders (ties keep the checkpoint's order, which is by name, B F O S: the
// safetensors writer stores tensors sorted by name):
//   sqnr    S 14.5 dB, B 24.3, O 27.7, F 31.4
//   flushed F 68.75%, O 46.9%, S 0, B 0
//   outlier O 46.9%, then 0
//   bulk    B 0.39, O 0.067, F 0.038, S 0 (empty bulk)
//   output  as sqnr
TEST(scan_rank, every_key_has_its_own_order) {
  temp_dir dir;
  constexpr std::int64_t rows = 16, cols = 64;
  const auto make = [&](auto value) {
    std::vector<float> v(rows * cols);
    for (std::int64_t i = 0; i < rows * cols; ++i) {
      const float sgn = uniform_open01(9, 1, static_cast<std::uint64_t>(i)) < 0.5 ? -1.0f : 1.0f;
      v[static_cast<std::size_t>(i)] = sgn * value((i % cols) / 16, i % 16);
    }
    return v;
  };
  const auto s = make([](std::int64_t, std::int64_t e) { return e == 0 ? 1.0f : 0.83f; });
  const auto f = make([](std::int64_t, std::int64_t e) { return e < 2 ? 1.0f : e < 5 ? 0.5f : 0.01f; });
  const auto o = make([](std::int64_t b, std::int64_t e) {
    return b % 2 == 0 ? (e == 0 ? 1.0f : 0.03f) : (e < 4 ? 1.0f : 0.5f);
  });
  const auto b = make([](std::int64_t, std::int64_t e) { return e < 2 ? 1.0f : 0.06f; });
  const auto ck = dir.path / "m.safetensors";
  io::write_safetensors(ck, {io::tensor_of("S", {rows, cols}, s), io::tensor_of("F", {rows, cols}, f),
                             io::tensor_of("O", {rows, cols}, o), io::tensor_of("B", {rows, cols}, b)});
  using v = std::vector<std::string>;
  EXPECT_EQ(order(scan(ck, probes::scan_rank::m_sqnr)), (v{"S", "B", "O", "F"}));
  EXPECT_EQ(order(scan(ck, probes::scan_rank::m_flushed)), (v{"F", "O", "B", "S"}));
  EXPECT_EQ(order(scan(ck, probes::scan_rank::m_outlier)), (v{"O", "B", "F", "S"}));
  EXPECT_EQ(order(scan(ck, probes::scan_rank::m_bulk)), (v{"B", "O", "F", "S"}));
  EXPECT_EQ(order(scan(ck, probes::scan_rank::m_output)), (v{"S", "B", "O", "F"}));

  // The hand counts behind them.
  const auto r = scan(ck, probes::scan_rank::m_sqnr);
  const auto at = [&](const std::string& n) -> const probes::scan_scheme_result& {
    return std::find_if(r.tensors.begin(), r.tensors.end(), [&](const auto& t) { return t.name == n; })->results[0];
  };
  EXPECT_EQ(at("F").flushed, rows * 4 * 11);
  EXPECT_EQ(at("F").outlier_flushed, 0);
  EXPECT_EQ(at("O").flushed, rows * 2 * 15);
  EXPECT_EQ(at("O").outlier_flushed, rows * 2 * 15);
  EXPECT_EQ(at("S").bulk_sum_sq, 0.0);  // an empty bulk
  EXPECT_EQ(at("S").bulk_rel_rms, 0.0);
  const double six = 0.06f;  // as stored
  EXPECT_NEAR(at("B").bulk_sum_sq, rows * 4 * 14 * six * six, 1e-12);  // the 0.06s and nothing else
  EXPECT_NEAR(at("B").bulk_rel_rms, (1.0 / 12 - 0.06f) / 0.06f, 1e-6);
  EXPECT_NEAR(at("O").outlier_flushed_frac, 15.0 / 32, 1e-15);
}

TEST(scan_rank, unknown_key_is_an_input_error_naming_the_flag) {
  EXPECT_EQ(probes::parse_scan_rank("outlier", "--rank-by"), probes::scan_rank::m_outlier);
  try {
    (void)probes::parse_scan_rank("snr", "--rank-by");
    FAIL() << "no error";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), 2);
    EXPECT_NE(std::string(e.what()).find("--rank-by"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("snr"), std::string::npos) << e.what();
  }
}

}  // namespace
