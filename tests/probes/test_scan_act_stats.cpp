// scan --act-stats (issue 17): the output error sum_ij dW_ij^2 E[x_j^2] against a double loop over
// quantize()'s dequantized values, on the fused path's geometries (full-block rows, partial
// blocks, blocks 6 and 1 wide, 2-D tiles, a NaN row, several bands) and the quantize()-based
// path; the other columns unchanged to the bit; a checkpoint on which output and sqnr rank
// different tensors first; the key rule; bad statistics exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
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
  fs::path path = fs::temp_directory_path() / ("numprobe_test_scan_act_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
};

const probes::scan_tensor& find(const probes::scan_report& r, const std::string& n) {
  const auto it = std::find_if(r.tensors.begin(), r.tensors.end(), [&](const auto& t) { return t.name == n; });
  if (it == r.tensors.end()) throw std::runtime_error("no tensor " + n);
  return *it;
}

std::vector<std::string> order(const probes::scan_report& r) {
  std::vector<std::string> out;
  for (const auto& t : r.tensors) out.push_back(t.name);
  return out;
}

// E[x_j^2] spread over four decades, so a wrong column (a cursor off by one block) shows.
std::vector<float> stats_of(std::uint64_t seed, std::int64_t cols) {
  std::vector<float> s(static_cast<std::size_t>(cols));
  for (std::int64_t j = 0; j < cols; ++j)
    s[static_cast<std::size_t>(j)] = static_cast<float>(std::pow(10.0, 4.0 * uniform_open01(seed, 3, static_cast<std::uint64_t>(j))));
  return s;
}

struct geometry {
  std::string name, scheme;
  std::int64_t rows, cols;
  std::int64_t group = 0;  // > 0: the `group` scheme with this group size
  int axis = 1;
  bool nan_row = false;
};

// The independent sums: quantize() of the whole tensor, then a double loop, column j's weight
// s_j on every element of column j; finite inputs with finite dequantized values only (the
// scan's rule; a finite input coded to a non-finite value makes the error inf).
struct reference_sums {
  double energy = 0.0, err = 0.0;
};
reference_sums reference(const formats::scheme_config& c, const std::vector<float>& w, const std::vector<float>& s,
                         std::int64_t rows, std::int64_t cols) {
  const std::vector<double> x(w.begin(), w.end());
  const auto q = formats::quantize(c, x, rows, cols);
  reference_sums out;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const auto at = static_cast<std::size_t>(i * cols + j);
      if (!std::isfinite(x[at])) continue;
      const double d = q.dequant[at] - x[at], sj = s[static_cast<std::size_t>(j)];
      if (!std::isfinite(q.dequant[at])) out.err = std::numeric_limits<double>::infinity();
      out.energy += x[at] * x[at] * sj;
      out.err += d * d * sj;
    }
  return out;
}

TEST(scan_act_stats, output_error_matches_a_double_loop_over_quantize_on_every_geometry) {
  temp_dir dir;
  const std::vector<geometry> gs = {
      {"nvfp4_full_rows.weight", "nvfp4", 37, 272},               // 17 full blocks a row: the unmasked row path
      {"mxfp4_partial.weight", "mxfp4", 19, 300},                  // 300 = 9 x 32 + 12: a partial last block
      {"mxfp8_nan.weight", "mxfp8", 23, 96, 0, 1, true},           // a NaN row: the masked path
      {"group6.weight", "group", 11, 70, 6},                       // 6-wide blocks: vectors straddle no block
      {"column_groups.weight", "group", 40, 21, 8, 0},             // blocks along rows: 1 column wide
      {"block2d.weight", "fp8-block128", 150, 200},                // 128 x 128 tiles, partial both ways
      {"fp8_tensor.weight", "fp8-tensor", 33, 52},                 // one scale, imposed on every band
      {"awq.weight", "int4-awq", 24, 260},                         // zero points: the quantize()-based path
  };
  std::vector<std::vector<float>> ws, ss;
  std::vector<io::tensor_to_write> weights, stats;
  for (std::size_t g = 0; g < gs.size(); ++g) {
    const auto& x = gs[g];
    std::vector<float> w(static_cast<std::size_t>(x.rows * x.cols));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(normal_at(50 + g, 0, i));
    if (x.nan_row)
      for (std::int64_t j = 0; j < x.cols; j += 7) w[static_cast<std::size_t>(5 * x.cols + j)] = std::nanf("");
    ws.push_back(std::move(w));
    ss.push_back(stats_of(70 + g, x.cols));
  }
  for (std::size_t g = 0; g < gs.size(); ++g) {
    weights.push_back(io::tensor_of(gs[g].name, {static_cast<std::uint64_t>(gs[g].rows), static_cast<std::uint64_t>(gs[g].cols)}, ws[g]));
    stats.push_back(io::tensor_of(gs[g].name, {static_cast<std::uint64_t>(gs[g].cols)}, ss[g]));
  }
  const auto ck = dir.path / "m.safetensors", st = dir.path / "act.safetensors";
  io::write_safetensors(ck, weights);
  io::write_safetensors(st, stats);

  for (std::size_t g = 0; g < gs.size(); ++g) {
    const auto& x = gs[g];
    const auto adjust = [&](formats::scheme_config& c) {
      if (x.group > 0) {
        c.group = x.group;
        c.axis = x.axis;
      }
    };
    probes::scan_options o;
    o.checkpoint = ck.string();
    o.schemes = {x.scheme};
    o.filter = "^" + x.name + "$";
    o.adjust_scheme = adjust;
    o.band_elements = 1024;  // several bands per tensor
    const auto plain = probes::run_scan(o);
    o.act_stats = st.string();
    const auto r = probes::run_scan(o);
    const auto& t = r.tensors.at(0);
    const auto& p = t.results.at(0);
    EXPECT_EQ(t.act_stats, x.name);
    ASSERT_TRUE(p.output_weighted) << x.name;
    auto c = formats::find_scheme(x.scheme, "x").defaults;
    adjust(c);
    const auto ref = reference(c, ws[g], ss[g], x.rows, x.cols);
    // Both sides sum n = rows x cols non-negative terms of two roundings each: the scan in four
    // lanes per strip, (n/4 + 4) u, the loop one by one, (n + 1) u, so they differ by at most
    // (1.25 n + 5) u of the sum (u = 2^-53, first order).
    const double n = static_cast<double>(x.rows * x.cols), tol = (1.25 * n + 5) * 0x1p-53;
    EXPECT_NEAR(p.output_sum_sq, ref.energy, tol * ref.energy) << x.name;
    EXPECT_NEAR(p.output_sum_sq_err, ref.err, tol * ref.err) << x.name;
    EXPECT_GT(ref.err, 0.0) << x.name;  // every geometry loses something: the check can fail
    EXPECT_NEAR(p.output_sqnr_db, 10.0 * std::log10(ref.energy / ref.err), 1e-9) << x.name;
    EXPECT_NEAR(p.output_rel_rms, std::sqrt(ref.err / ref.energy), 1e-12 * std::sqrt(ref.err / ref.energy)) << x.name;
    // The statistics change no other column: the same sums to the bit.
    const auto& q = plain.tensors.at(0).results.at(0);
    EXPECT_FALSE(q.output_weighted);
    EXPECT_EQ(q.output_rel_rms, q.rel_rms);
    EXPECT_EQ(p.sum_sq, q.sum_sq) << x.name;
    EXPECT_EQ(p.sum_sq_err, q.sum_sq_err) << x.name;
    EXPECT_EQ(p.bulk_sum_sq, q.bulk_sum_sq) << x.name;
    EXPECT_EQ(p.bulk_sum_sq_err, q.bulk_sum_sq_err) << x.name;
    EXPECT_EQ(p.max_abs, q.max_abs) << x.name;
    EXPECT_EQ(p.flushed, q.flushed) << x.name;
    EXPECT_EQ(p.outlier_flushed, q.outlier_flushed) << x.name;
    EXPECT_EQ(p.worst.flat, q.worst.flat) << x.name;
  }
}

// Three 48 x 272 NVFP4 tensors (17 blocks a row):
//   A  every 16-wide block one +-1 and fifteen +-0.83 (t = 4.98 codes to 4: 20% off, SQNR 14.5 dB),
//      its statistics 100 on each block's first column (the exact +-1) and 1 elsewhere, so its
//      weighted error is small;
//   B  N(0,1) weights except 8 input channels of 0.01 N(0,1), which flush (the block scale is
//      about amax / 6 ~ 0.4, the flush threshold a quarter of it); its statistics 1e5 on those 8
//      channels and 1 elsewhere: a quarter of its weighted energy is flushed;
//   C  A's values, with no statistics in the file.
// By sqnr A and C rank first (ties keep the name order); by output with statistics B first, then
// A, then C after every tensor with statistics although its isotropic estimate beats A's.
TEST(scan_act_stats, output_ranks_the_tensor_whose_errors_meet_large_activations_first) {
  temp_dir dir;
  constexpr std::int64_t rows = 48, cols = 272;
  constexpr std::int64_t hot[] = {5, 40, 77, 100, 141, 190, 222, 270};
  std::vector<float> a(rows * cols), b(rows * cols), sa(cols, 1.0f), sb(cols, 1.0f);
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const auto at = static_cast<std::size_t>(i);
    const float sgn = uniform_open01(11, 1, at) < 0.5 ? -1.0f : 1.0f;
    a[at] = sgn * ((i % cols) % 16 == 0 ? 1.0f : 0.83f);
    b[at] = static_cast<float>(normal_at(12, 0, at));
  }
  for (std::int64_t j = 0; j < cols; j += 16) sa[static_cast<std::size_t>(j)] = 100.0f;
  for (auto j : hot) {
    sb[static_cast<std::size_t>(j)] = 1e5f;
    for (std::int64_t r = 0; r < rows; ++r) b[static_cast<std::size_t>(r * cols + j)] *= 0.01f;
  }
  const auto ck = dir.path / "m.safetensors", st = dir.path / "act.safetensors";
  io::write_safetensors(ck, {io::tensor_of("A.weight", {rows, cols}, a), io::tensor_of("B.weight", {rows, cols}, b),
                             io::tensor_of("C.weight", {rows, cols}, a)});
  // Both key forms: A's statistics under its own name, B's as B.input_sq_mean.
  io::write_safetensors(st, {io::tensor_of("A.weight", {cols}, sa), io::tensor_of("B.input_sq_mean", {cols}, sb),
                             io::tensor_of("unused.input_sq_mean", {4}, std::vector<float>(4, 1.0f))});
  const auto scan = [&](probes::scan_rank k, bool with_stats) {
    probes::scan_options o;
    o.checkpoint = ck.string();
    o.rank_by = k;
    if (with_stats) o.act_stats = st.string();
    return probes::run_scan(o);
  };
  using v = std::vector<std::string>;
  const auto by_sqnr = scan(probes::scan_rank::m_sqnr, true);
  const auto by_output = scan(probes::scan_rank::m_output, true);
  EXPECT_EQ(order(by_sqnr), (v{"A.weight", "C.weight", "B.weight"}));
  EXPECT_EQ(order(by_output), (v{"B.weight", "A.weight", "C.weight"}));
  // Without statistics output is sqnr's order (isotropic activations).
  EXPECT_EQ(order(scan(probes::scan_rank::m_output, false)), order(by_sqnr));

  // Clearly apart, not by a hair (the structure above, not the seed, makes the gaps).
  const auto& pa = find(by_output, "A.weight").results[0];
  const auto& pb = find(by_output, "B.weight").results[0];
  const auto& pc = find(by_output, "C.weight").results[0];
  std::printf("sqnr_db A %.2f B %.2f C %.2f; output_sqnr_db A %.2f B %.2f C %.2f (isotropic)\n", pa.sqnr_db, pb.sqnr_db,
              pc.sqnr_db, pa.output_sqnr_db, pb.output_sqnr_db, pc.output_sqnr_db);
  EXPECT_LT(pa.sqnr_db, pb.sqnr_db - 3.0);
  EXPECT_GT(pb.output_rel_rms, 3.0 * pa.output_rel_rms);
  EXPECT_GT(pc.output_rel_rms, pa.output_rel_rms);  // C would precede A if it were comparable
  EXPECT_FALSE(pc.output_weighted);
  EXPECT_EQ(pc.output_rel_rms, pc.rel_rms);
  // B's flushed channels: their whole weighted energy is error (dq = 0), a lower bound on out_err.
  double hot_energy = 0.0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (auto j : hot) {
      const double x = b[static_cast<std::size_t>(r * cols + j)];
      hot_energy += x * x * 1e5;
    }
  EXPECT_GE(pb.output_sum_sq_err, hot_energy * (1 - 1e-12));
  EXPECT_EQ(find(by_output, "A.weight").act_stats, "A.weight");
  EXPECT_EQ(find(by_output, "B.weight").act_stats, "B.input_sq_mean");
  EXPECT_EQ(find(by_output, "C.weight").act_stats, "");
  EXPECT_EQ(by_output.without_act_stats, (v{"C.weight"}));
  EXPECT_EQ(by_output.act_stats_unused, 1u);
}

// Bad statistics: one-line errors naming the file and the tensors, exit 2, before any scan.
TEST(scan_act_stats, bad_statistics_are_input_errors_naming_the_tensors) {
  temp_dir dir;
  constexpr std::int64_t rows = 4, cols = 32;
  std::vector<float> w(rows * cols);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(normal_at(3, 0, i));
  const auto ck = dir.path / "m.safetensors";
  io::write_safetensors(ck, {io::tensor_of("layer.weight", {rows, cols}, w)});
  const auto expect_error = [&](std::vector<io::tensor_to_write> stats, std::vector<std::string> words) {
    const auto st = dir.path / "act.safetensors";
    io::write_safetensors(st, std::move(stats));
    probes::scan_options o;
    o.checkpoint = ck.string();
    o.act_stats = st.string();
    try {
      (void)probes::run_scan(o);
      ADD_FAILURE() << "no error for " << words[0];
    } catch (const numprobe::error& e) {
      EXPECT_EQ(static_cast<int>(e.code()), 2) << e.what();
      for (const auto& word : words) EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  const std::vector<float> short_stats(cols - 1, 1.0f);
  expect_error({io::tensor_of("layer.input_sq_mean", {cols - 1}, short_stats)},
               {"layer.input_sq_mean", "layer.weight", "31 values", "32 input channels", "--act-stats"});
  std::vector<float> negative(cols, 1.0f), nan(cols, 1.0f);
  negative[17] = -0.5f;
  nan[3] = std::nanf("");
  expect_error({io::tensor_of("layer.weight", {cols}, negative)}, {"layer.weight", "channel 17", ">= 0"});
  expect_error({io::tensor_of("layer.weight", {cols}, nan)}, {"layer.weight", "channel 3"});
  expect_error({io::tensor_of("layer.weight", {cols}, std::vector<std::uint8_t>(cols, 1))}, {"layer.weight", "u8"});
  expect_error({io::tensor_of("other.weight", {cols}, std::vector<float>(cols, 1.0f))}, {"none of its 1 tensors"});
  probes::scan_options o;
  o.checkpoint = ck.string();
  o.act_stats = (dir.path / "missing.safetensors").string();
  EXPECT_THROW((void)probes::run_scan(o), numprobe::error);
}

}  // namespace
