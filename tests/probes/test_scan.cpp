// scan: a generated checkpoint with a known outlier channel ranks that tensor first with a
// hand-counted number of flushes; banded quantization equals whole-tensor quantization; every
// e4m3fn code's fnuz migration follows the hand-derived rules.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "numprobe/base/rng.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/io/safetensors.hpp"
#include "probes/scan/scan_fnuz.hpp"
#include "probes/scan/scan_probe.hpp"

namespace {

namespace fs = std::filesystem;
using namespace numprobe;

constexpr std::int64_t k_rows = 48, k_cols = 256, k_outlier_col = 5;
constexpr double k_outlier = 100.0;

// Values +-{1, 0.5, 0.25} with a +-1 in every 16-wide block: with tensor amax 1, NVFP4's
// s_t = 1/2688 and s_b = 448 give scale 1/6, and 6, 3, 1.5 are e2m1 values, so a plain tensor
// quantizes exactly up to the fp32 rounding of s_t (no flushes). An outlier of 100 sets its block's scale to 100/6,
// where |x| / scale <= 0.06 < 0.25 rounds to 0: the block's 15 other elements flush.
std::vector<float> plain(std::uint64_t seed) {
  std::vector<float> v(k_rows * k_cols);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double u = uniform_open01(seed, 1, i);
    const double sgn = uniform_open01(seed, 2, i) < 0.5 ? -1.0 : 1.0;
    const double mag = i % 16 == 0 ? 1.0 : (u < 1.0 / 3 ? 1.0 : u < 2.0 / 3 ? 0.5 : 0.25);
    v[i] = static_cast<float>(sgn * mag);
  }
  return v;
}

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("numprobe_test_scan_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
};

TEST(scan, outlier_channel_ranks_first_with_hand_counted_flushes) {
  temp_dir dir;
  auto q = plain(1), k = plain(2), down = plain(3);
  for (std::int64_t r = 0; r < k_rows; ++r) down[r * k_cols + k_outlier_col] = static_cast<float>(k_outlier);
  std::vector<float> norm(k_cols, 1.0f);
  const auto ck = dir.path / "model.safetensors";
  io::write_safetensors(ck, {io::tensor_of("model.layers.0.self_attn.q_proj.weight", {k_rows, k_cols}, q),
                             io::tensor_of("model.layers.1.self_attn.k_proj.weight", {k_rows, k_cols}, k),
                             io::tensor_of("model.layers.1.mlp.down_proj.weight", {k_rows, k_cols}, down),
                             io::tensor_of("model.norm.weight", {k_cols}, norm)});
  probes::scan_options o;
  o.checkpoint = ck.string();
  o.schemes = {"nvfp4", "mxfp4", "fp8-block128"};
  o.band_elements = 4 * k_cols;  // many bands: exercises the banded path
  const auto r = probes::run_scan(o);
  ASSERT_EQ(r.tensors.size(), 3u);  // the norm is not a matrix
  ASSERT_EQ(r.skipped.size(), 1u);
  const auto& first = r.tensors[0];
  EXPECT_EQ(first.name, "model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(first.layer_type, "down_proj");
  EXPECT_EQ(first.layer, 1);
  // Hand count: each row's outlier block (16 wide) flushes its 15 other elements.
  const auto& nv = first.results[0];
  EXPECT_EQ(nv.flushed, k_rows * 15);
  EXPECT_EQ(nv.outlier_blocks, k_rows);
  EXPECT_EQ(nv.outlier_flushed, k_rows * 15);
  // s_t = fp32(100 / 2688) rounds, so 100 / (s_b s_t) may exceed 6 by a hair: the outlier
  // itself can count as clipped (to 6 s_b s_t, within fp32 rounding of 100), nothing else.
  EXPECT_LE(nv.clipped, k_rows);
  EXPECT_LT(nv.sqnr_db, 40.0);
  // The plain tensors are exact up to the fp32 rounding of s_t.
  EXPECT_GT(r.tensors[1].results[0].sqnr_db, 100.0);
  EXPECT_TRUE(nv.worst.outlier);
  EXPECT_EQ(nv.worst.stats.argmax % k_cols, k_outlier_col);
  EXPECT_EQ(nv.worst.stats.flushed, 15);
  for (std::size_t t = 1; t < r.tensors.size(); ++t) EXPECT_EQ(r.tensors[t].results[0].flushed, 0);
  // MXFP4 (blocks of 32, floor rule): X = floor(log2 100) - 2 = 4, so |x| / 16 <= 1/16 < 0.25
  // flushes the block's other 31 elements.
  EXPECT_EQ(first.results[1].scheme, "mxfp4");
  EXPECT_EQ(first.results[1].flushed, k_rows * 31);
  // Groups and totals.
  ASSERT_FALSE(r.by_type[0].empty());
  EXPECT_EQ(r.by_type[0][0].key, "down_proj");
  EXPECT_EQ(r.by_depth[0].size(), 2u);
  EXPECT_EQ(r.totals[0].elements, 3 * k_rows * k_cols);
  EXPECT_NEAR(r.totals[0].bytes * 8 / r.totals[0].elements, 4.5, 0.01);  // e2m1 + e4m3/16 (+ s_t)
  EXPECT_NEAR(r.totals[1].bytes * 8 / r.totals[1].elements, 4.25, 1e-9);
  // --all takes the norm too.
  o.all = true;
  o.filter = "norm";
  const auto n = probes::run_scan(o);
  ASSERT_EQ(n.tensors.size(), 1u);
  EXPECT_EQ(n.tensors[0].layer_type, "norms");
}

TEST(scan, banded_quantization_equals_whole_tensor) {
  const std::int64_t rows = 300, cols = 200;  // partial 128x128 blocks, partial bands
  std::vector<double> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal_at(9, 1, i) * (i % 97 == 0 ? 50.0 : 1.0);
  const auto fetch = [&](std::int64_t r0, std::int64_t, std::span<double> out) {
    std::copy_n(x.begin() + r0 * cols, out.size(), out.begin());
  };
  for (const char* s : {"nvfp4", "mxfp4", "fp8-block128", "tensor", "int4-awq", "fp8-channel"}) {
    const auto whole = formats::quantize(formats::find_scheme(s).defaults, x, rows, cols);
    const auto band = probes::scan_tensor_scheme(s, rows, cols, fetch, 3 * cols);
    double se = 0;
    for (std::size_t i = 0; i < x.size(); ++i) se += (whole.dequant[i] - x[i]) * (whole.dequant[i] - x[i]);
    EXPECT_EQ(band.flushed, whole.flushed) << s;
    EXPECT_EQ(band.clipped, whole.clipped) << s;
    EXPECT_EQ(band.scale_underflow_blocks, whole.scale_underflow_blocks) << s;
    EXPECT_EQ(band.blocks, static_cast<std::int64_t>(whole.blocks.size())) << s;
    EXPECT_NEAR(band.sum_sq_err, se, 1e-12 * se) << s;
  }
}

// libgomp is linked through numprobe_probes; the test itself is not compiled with -fopenmp.
extern "C" void omp_set_num_threads(int);

// The fused path's result does not depend on the thread count, nor on whether the elements are
// read in place (bf16 here) or fetched as doubles: every field, bit for bit.
TEST(scan, same_result_for_one_or_two_threads_and_in_place_or_fetched) {
  const std::int64_t rows = 70, cols = 512;  // 70 rows: bands of 8 rows, the last partial
  std::vector<std::uint16_t> bf16(rows * cols);
  std::vector<double> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto f = static_cast<float>(normal_at(4, 1, i) * (i % 331 == 0 ? 80.0 : 1.0));
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    bf16[i] = static_cast<std::uint16_t>(u >> 16);
    x[i] = std::bit_cast<float>(std::uint32_t{bf16[i]} << 16);
  }
  x[3 * cols + 7] = std::numeric_limits<double>::quiet_NaN();  // one row takes the masked path
  bf16[3 * cols + 7] = 0x7FC0;
  const auto fetch = [&](std::int64_t r0, std::int64_t, std::span<double> out) {
    std::copy_n(x.begin() + r0 * cols, out.size(), out.begin());
  };
  const auto same = [](const probes::scan_scheme_result& a, const probes::scan_scheme_result& b) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a.sum_sq), std::bit_cast<std::uint64_t>(b.sum_sq));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a.sum_sq_err), std::bit_cast<std::uint64_t>(b.sum_sq_err));
    EXPECT_EQ(a.max_abs, b.max_abs);
    EXPECT_EQ(a.flushed, b.flushed);
    EXPECT_EQ(a.clipped, b.clipped);
    EXPECT_EQ(a.blocks, b.blocks);
    EXPECT_EQ(a.outlier_blocks, b.outlier_blocks);
    EXPECT_EQ(a.outlier_flushed, b.outlier_flushed);
    EXPECT_EQ(a.nonfinite_inputs, b.nonfinite_inputs);
    EXPECT_EQ(a.worst.flat, b.worst.flat);
    EXPECT_EQ(a.worst.stats.argmax, b.worst.stats.argmax);
    EXPECT_EQ(a.worst.stats.scale, b.worst.stats.scale);
    ASSERT_EQ(a.worst.dequant.size(), b.worst.dequant.size());
    for (std::size_t i = 0; i < a.worst.dequant.size(); ++i) {
      if (!std::isnan(a.worst.dequant[i])) {
        EXPECT_EQ(a.worst.dequant[i], b.worst.dequant[i]);
      }
    }
  };
  // int4-awq takes the quantize()-based path (zero points), read in place element by element.
  for (const char* s : {"nvfp4", "mxfp4", "fp8-block128", "fp8-channel", "tensor", "int4-g128",
                        "int4-awq"}) {
    SCOPED_TRACE(s);
    const auto* data = reinterpret_cast<const std::byte*>(bf16.data());
    omp_set_num_threads(1);
    const auto one = probes::scan_tensor_scheme(s, rows, cols, data, io::dtype::m_bf16, 8 * cols);
    omp_set_num_threads(2);
    const auto two = probes::scan_tensor_scheme(s, rows, cols, data, io::dtype::m_bf16, 8 * cols);
    const auto fetched = probes::scan_tensor_scheme(s, rows, cols, fetch, 8 * cols);
    same(one, two);
    same(one, fetched);
    EXPECT_EQ(one.nonfinite_inputs, 1);
    EXPECT_GT(one.flushed, 0);
  }
}

// The read-ahead thread only warms the page cache: a sharded checkpoint scans to the same
// report, bit for bit, with it on (a window smaller than one tensor, and a large one) or off,
// on one thread or two.
TEST(scan, same_report_with_or_without_read_ahead_for_one_or_two_threads) {
  temp_dir dir;
  auto q = plain(5), k = plain(6), down = plain(7);
  for (std::int64_t r = 0; r < k_rows; ++r) down[r * k_cols + k_outlier_col] = static_cast<float>(k_outlier);
  for (std::size_t i = 0; i < q.size(); i += 97) q[i] *= 1.0f + 0.01f * static_cast<float>(i % 13);
  io::write_safetensors(dir.path / "a.safetensors",
                        {io::tensor_of("model.layers.0.self_attn.q_proj.weight", {k_rows, k_cols}, q),
                         io::tensor_of("model.layers.0.self_attn.k_proj.weight", {k_rows, k_cols}, k)});
  io::write_safetensors(dir.path / "b.safetensors",
                        {io::tensor_of("model.layers.1.mlp.down_proj.weight", {k_rows, k_cols}, down)});
  {
    std::FILE* f = std::fopen((dir.path / "model.safetensors.index.json").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("{\"weight_map\": {\"model.layers.0.self_attn.q_proj.weight\": \"a.safetensors\", "
               "\"model.layers.0.self_attn.k_proj.weight\": \"a.safetensors\", "
               "\"model.layers.1.mlp.down_proj.weight\": \"b.safetensors\"}}", f);
    std::fclose(f);
  }
  probes::scan_options o;
  o.checkpoint = (dir.path / "model.safetensors.index.json").string();
  o.schemes = {"nvfp4", "mxfp4", "fp8-block128", "int4-awq"};
  o.band_elements = 4 * k_cols;
  std::vector<std::string> reports;
  for (const int threads : {1, 2})
    for (const std::uint64_t window : {std::uint64_t{0}, std::uint64_t{4096}, std::uint64_t{1} << 30}) {
      omp_set_num_threads(threads);
      o.prefetch_window = window;
      auto j = probes::to_json(probes::run_scan(o));
      j.erase("seconds");  // wall time: the only field allowed to differ
      reports.push_back(j.dump());
    }
  // Bands handed back to the kernel as they are done (release_above 0: every tensor; 16-row
  // bands of 16 KiB hold whole pages, so pages really are dropped and faulted in again by the
  // later passes and schemes): the same report as keeping the mapping.
  o.band_elements = 16 * k_cols;
  std::vector<std::string> released;
  for (const std::uint64_t above : {std::uint64_t{1} << 30, std::uint64_t{0}})
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      o.release_above = above;
      auto j = probes::to_json(probes::run_scan(o));
      j.erase("seconds");
      released.push_back(j.dump());
    }
  omp_set_num_threads(2);
  ASSERT_EQ(reports.size(), 6u);
  EXPECT_NE(reports[0].find("down_proj"), std::string::npos);
  for (std::size_t i = 1; i < reports.size(); ++i) EXPECT_EQ(reports[i], reports[0]) << i;
  for (std::size_t i = 1; i < released.size(); ++i) EXPECT_EQ(released[i], released[0]) << i;
}

TEST(scan, layer_names) {
  EXPECT_EQ(probes::layer_type_of("model.layers.3.self_attn.q_proj.weight"), "q_proj");
  EXPECT_EQ(probes::layer_type_of("model.layers.3.self_attn.q_norm.weight"), "norms");
  EXPECT_EQ(probes::layer_type_of("model.layers.3.mlp.gate_proj.weight"), "gate_proj");
  EXPECT_EQ(probes::layer_type_of("model.layers.3.mlp.up_proj.weight"), "up_proj");
  EXPECT_EQ(probes::layer_type_of("model.embed_tokens.weight"), "embeddings");
  EXPECT_EQ(probes::layer_type_of("lm_head.weight"), "lm_head");
  EXPECT_EQ(probes::layer_type_of("model.layers.0.self_attn.o_proj.weight"), "o_proj");
  EXPECT_EQ(probes::layer_index_of("model.layers.12.mlp.down_proj.weight"), 12);
  EXPECT_EQ(probes::layer_index_of("transformer.h.7.attn.c_attn.weight"), 7);
  EXPECT_EQ(probes::layer_index_of("lm_head.weight"), -1);
}

// Hand-derived e4m3fn value: sign, 4-bit exponent (bias 7), 3-bit mantissa; subnormal at e=0.
double fn_value_by_hand(unsigned c) {
  const double sign = (c & 0x80) ? -1.0 : 1.0;
  const unsigned e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::nan("");
  return sign * (e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, int(e) - 7));
}

TEST(scan_fnuz, every_e4m3fn_code_follows_the_rules) {
  int clips = 0, nans = 0;
  for (unsigned c = 0; c < 256; ++c) {
    const auto m = probes::map_e4m3fn_code(static_cast<std::uint8_t>(c));
    const double v = fn_value_by_hand(c);
    SCOPED_TRACE(c);
    if (c == 0x7F || c == 0xFF) {
      ++nans;
      EXPECT_TRUE(std::isnan(m.fn_value));
      EXPECT_TRUE(m.nan_becomes_number);
      EXPECT_EQ(m.reinterpreted, c == 0x7F ? 240.0 : -240.0);  // fnuz's max: a number, not NaN
      EXPECT_FALSE(m.rewrite);
      continue;
    }
    EXPECT_FALSE(m.nan_becomes_number);
    if (c == 0x80) {
      // -0 in fn is fnuz's only NaN: rewritten to +0.
      EXPECT_TRUE(m.rewrite);
      EXPECT_TRUE(std::isnan(m.reinterpreted));
      EXPECT_EQ(m.reuse_code, 0x00);
      EXPECT_EQ(m.reuse_value, 0.0);
      EXPECT_EQ(m.reencoded_code, 0x00);
      continue;
    }
    EXPECT_FALSE(m.rewrite);
    EXPECT_EQ(m.fn_value, v);
    // Same bits, half the value; the bit-reuse recipe (scale x2) is exact.
    EXPECT_EQ(m.reinterpreted, v / 2);
    EXPECT_EQ(m.reuse_code, c);
    EXPECT_EQ(m.reuse_value, v);
    // Re-encoding at the same scale: exponent field 15 (256..448) clips to 240; the rest is exact.
    const bool hand_clips = ((c >> 3) & 15) == 15;
    EXPECT_EQ(m.clips, hand_clips);
    clips += hand_clips;
    EXPECT_EQ(m.reencoded_value, hand_clips ? (v > 0 ? 240.0 : -240.0) : v);
  }
  EXPECT_EQ(clips, 14);  // 0x78..0x7E and 0xF8..0xFE
  EXPECT_EQ(nans, 2);
}

TEST(scan_fnuz, checkpoint_counts) {
  temp_dir dir;
  // One fp8 weight holding every code once plus three extra 0x80, and its scale.
  std::vector<std::uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<std::uint8_t>(i);
  codes.insert(codes.end(), {0x80, 0x80, 0x80, 0x7E});
  auto w = io::tensor_of("model.layers.0.mlp.up_proj.weight", {260}, codes);
  w.dtype = io::dtype::m_e4m3fn;
  const std::vector<float> scale{0.5f};
  const auto ck = dir.path / "fp8.safetensors";
  io::write_safetensors(ck, {w, io::tensor_of("model.layers.0.mlp.up_proj.weight_scale", {1}, scale)});
  const auto r = probes::run_fnuz_migration(ck.string(), "");
  ASSERT_EQ(r.tensors.size(), 1u);
  const auto& t = r.tensors[0];
  EXPECT_EQ(t.elements, 260);
  EXPECT_EQ(t.neg_zero_rewrites, 4);
  EXPECT_EQ(t.nan_codes, 2);
  EXPECT_EQ(t.clip_same_scale, 15);
  EXPECT_EQ(t.zeros, 1);
  EXPECT_EQ(t.amax, 448.0);
  EXPECT_DOUBLE_EQ(t.scale_factor_no_clip, 448.0 / 240.0);
  EXPECT_EQ(t.scale_tensor, "model.layers.0.mlp.up_proj.weight_scale");
}

}  // namespace

// A single .npy tensor scans like the same tensor inside a checkpoint: same numbers, named after
// the file, streamed from the memory map.
TEST(scan, npy_file_scans_as_a_one_tensor_checkpoint) {
  temp_dir dir;
  auto down = plain(4);
  for (std::int64_t r = 0; r < k_rows; ++r) down[r * k_cols + k_outlier_col] = static_cast<float>(k_outlier);
  const auto npy = dir.path / "down_proj.npy";
  const std::vector<std::uint64_t> shape{k_rows, k_cols};
  io::write_npy(npy, shape, down);
  const auto st = dir.path / "model.safetensors";
  io::write_safetensors(st, {io::tensor_of("down_proj", {k_rows, k_cols}, down)});
  probes::scan_options o;
  o.schemes = {"nvfp4", "mxfp4"};
  o.checkpoint = npy.string();
  const auto a = probes::run_scan(o);
  o.checkpoint = st.string();
  const auto b = probes::run_scan(o);
  ASSERT_EQ(a.tensors.size(), 1u);
  ASSERT_EQ(b.tensors.size(), 1u);
  EXPECT_EQ(a.tensors[0].name, "down_proj");
  for (std::size_t s = 0; s < 2; ++s) {
    const auto &x = a.tensors[0].results[s], &y = b.tensors[0].results[s];
    EXPECT_EQ(x.sqnr_db, y.sqnr_db);
    EXPECT_EQ(x.flushed, y.flushed);
    EXPECT_EQ(x.outlier_blocks, y.outlier_blocks);
    EXPECT_EQ(x.max_abs, y.max_abs);
  }
  EXPECT_EQ(a.tensors[0].results[0].flushed, k_rows * 15);  // the hand count of the test above
  o.checkpoint = (dir.path / "missing.npy").string();
  EXPECT_THROW((void)probes::run_scan(o), numprobe::error);
}
