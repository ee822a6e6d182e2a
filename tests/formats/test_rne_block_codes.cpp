// The block quantizer's code output (rne_block_quantizer::code_strip, the fast path of `convert
// --write`) against quantize(), the definition: for every scheme convert targets (NVFP4 under
// each division convention, MXFP4, fp8 e4m3fn and e4m3fnuz per tensor, channel and 128x128
// block, and the other covered registry entries), every element code, every dequantized value
// (with the sign of a zero) and every block's scale, scale code, amax and counts must be equal
// bit for bit. No tolerance: the fast path claims exactness.
//
// Inputs (seeded, numprobe/base/rng.hpp), in two families:
//   mixed:  normals with outliers (x 60 every 97th), exact zeros and -0, NaN and +-inf, a run of
//           tiny values (a block whose scale underflows to 0 in e4m3) and a whole outlier block;
//   ties:   every element a midpoint of two neighbouring grid values of the element format (so
//           subnormal midpoints, 0 / min_subnormal, the largest subnormal / min normal) or one
//           ulp either side, signed, times a power-of-two scale that each scheme reproduces
//           exactly (each block holds max_finite * 2^p, which sets its scale to 2^p; NVFP4's
//           first element 6 * 448 * 2^p sets s_t = 2^p and leaves the other blocks s_b = 1).
// Shapes cross every boundary: 16 and 32 columns, 128-row and 128-column blocks, the four-lane
// vectors (column counts not a multiple of 4 or of the block).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "numprobe/base/rng.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/formats/scheme.hpp"
#include "src/formats/rne_block_quantizer.hpp"

namespace nf = numprobe::formats;
namespace nd = numprobe::formats::detail;

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

struct code_case {
  std::string scheme;  // registry name, then the changes below
  nf::format_id element;
  nf::scale_division division = nf::scale_division::m_exact;
  bool ties = false;
  std::int64_t rows = 0, cols = 0;

  [[nodiscard]] nf::scheme_config config() const {
    auto c = nf::find_scheme(scheme).defaults;
    c.element = element;
    c.conv.division = division;
    return c;
  }
  // The case id: printed, and the --gtest_filter key.
  [[nodiscard]] std::string id() const {
    std::string s = scheme + "_" + std::string(nf::name(element));
    if (division == nf::scale_division::m_reciprocal) s += "_recip";
    if (division == nf::scale_division::m_reciprocal_approx) s += "_rcpapprox";
    s += (ties ? "_ties_" : "_mixed_") + std::to_string(rows) + "x" + std::to_string(cols);
    for (auto& ch : s)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
  }
};

std::vector<double> mixed_input(std::uint64_t seed, std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = rows * cols;
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::uint64_t>(i);
    double v = numprobe::normal_at(seed, 1, k);
    if (i % 97 == 5) v *= 60.0;
    if (i % 53 == 7) v = 0.0;
    if (i % 59 == 8) v = -0.0;
    x[static_cast<std::size_t>(i)] = v;
  }
  x[static_cast<std::size_t>(n / 3)] = k_nan;
  x[static_cast<std::size_t>(n / 2)] = k_inf;
  x[static_cast<std::size_t>(n / 2 + 1)] = -k_inf;
  // A run of tiny values: blocks whose ideal scale underflows the scale format (an e4m3 block
  // scale of 0 codes every element as quantize()'s t = +0).
  for (std::int64_t i = n - n / 7; i < n - n / 7 + 40 && i < n; ++i)
    x[static_cast<std::size_t>(i)] = 1e-30 * numprobe::normal_at(seed, 3, static_cast<std::uint64_t>(i));
  // An outlier block: the first 32 elements of row 1 a thousand times larger.
  for (std::int64_t i = cols; i < cols + 32 && i < n; ++i) x[static_cast<std::size_t>(i)] *= 1000.0;
  return x;
}

std::vector<double> tie_input(std::uint64_t seed, const nf::scheme_config& c, std::int64_t rows, std::int64_t cols) {
  const auto& e = nf::info(c.element);
  // The non-negative grid values (codes with the sign bit clear), ascending, and the points
  // between neighbours: the midpoint and one ulp either side of it.
  std::vector<double> grid;
  for (std::uint32_t code = 0; code < (1u << (e.bits - 1)); ++code) {
    const double v = nf::decode(c.element, code);
    if (std::isfinite(v)) grid.push_back(v);
  }
  std::sort(grid.begin(), grid.end());
  std::vector<double> points;
  for (std::size_t k = 0; k + 1 < grid.size(); ++k) {
    const double mid = 0.5 * (grid[k] + grid[k + 1]);  // exact: one more bit than the format
    points.push_back(mid);
    points.push_back(std::nextafter(mid, 0.0));
    points.push_back(std::nextafter(mid, k_inf));
  }
  const double p = std::ldexp(1.0, -3);  // the scale every block is given
  const std::int64_t n = rows * cols;
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::uint64_t>(i);
    const auto pick = static_cast<std::size_t>(numprobe::uniform_open01(seed, 4, k) * static_cast<double>(points.size()));
    const double sign = numprobe::uniform_open01(seed, 5, k) < 0.5 ? -1.0 : 1.0;
    x[static_cast<std::size_t>(i)] = sign * points[std::min(pick, points.size() - 1)] * p;
  }
  // Every 16 columns (each block of 16 or 32, and each row, 128-block and the tensor) holds
  // max_finite * p, so every scale is p.
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; j += 16) x[static_cast<std::size_t>(r * cols + j)] = e.max_finite * p;
  // NVFP4: s_t = amax / (6 * 448) = p exactly, the other blocks' s_b = e4m3(6 p / (6 p)) = 1.
  if (c.kind == nf::scheme_kind::m_nvfp4) x[0] = e.max_finite * 448.0 * p;
  return x;
}

std::vector<code_case> cases() {
  std::vector<code_case> out;
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes{{3, 64}, {5, 100}, {130, 203}, {129, 256}, {2, 45}};
  const auto add = [&](const std::string& scheme, nf::format_id element, nf::scale_division d = nf::scale_division::m_exact) {
    for (bool ties : {false, true})
      for (const auto& [r, c] : shapes) out.push_back({scheme, element, d, ties, r, c});
  };
  using fid = nf::format_id;
  add("nvfp4", fid::m_e2m1);
  add("nvfp4", fid::m_e2m1, nf::scale_division::m_reciprocal);
  add("nvfp4", fid::m_e2m1, nf::scale_division::m_reciprocal_approx);
  add("mxfp4", fid::m_e2m1);
  for (const auto f : {fid::m_e4m3fn, fid::m_e4m3fnuz})
    for (const char* s : {"fp8-tensor", "fp8-channel", "fp8-block128", "mxfp8"}) add(s, f);
  // The other covered element kinds the codes take: e5m2 (an infinity in the format), fp6 and
  // integers (two's complement codes).
  add("mxfp8-e5m2", fid::m_e5m2);
  add("mxfp6", fid::m_e2m3);
  add("int8-channel", fid::m_i8);
  add("int4-sym", fid::m_i4);
  add("mxint8", fid::m_i8);
  return out;
}

class rne_block_codes : public ::testing::TestWithParam<code_case> {};

TEST_P(rne_block_codes, equal_quantize_bit_for_bit) {
  const code_case& k = GetParam();
  const auto c = k.config();
  ASSERT_TRUE(nd::rne_block_quantizer::covers(c)) << k.id();
  const auto x = k.ties ? tie_input(18, c, k.rows, k.cols) : mixed_input(18, k.rows, k.cols);
  const auto want = nf::quantize(c, x, k.rows, k.cols);

  nd::rne_block_quantizer fq(c);
  fq.set_tensor_amax(nd::rne_block_quantizer::finite_amax(x.data(), nd::element_storage::m_f64, x.size()));
  const auto g = nf::grid_of(c, k.rows, k.cols);
  std::vector<nf::block_stats> blocks(static_cast<std::size_t>(g.count()));
  std::vector<std::uint8_t> codes(x.size(), 0xA5);  // a sentinel: every byte must be written
  std::vector<double> dq(x.size(), 12345.0);
  for (std::int64_t br = 0; br < g.grid_rows; ++br) {
    const std::int64_t r0 = br * g.block_rows;
    fq.code_strip(x.data(), nd::element_storage::m_f64, k.cols, r0, std::min(g.block_rows, k.rows - r0), g.block_cols,
                  std::span(blocks).subspan(static_cast<std::size_t>(br * g.grid_cols), static_cast<std::size_t>(g.grid_cols)),
                  codes.data(), dq.data());
  }
  if (c.kind == nf::scheme_kind::m_nvfp4) {
    EXPECT_EQ(fq.tensor_scale(), want.tensor_scale);
  }
  ASSERT_EQ(blocks.size(), want.blocks.size());
  for (std::size_t j = 0; j < blocks.size(); ++j) {
    const auto& a = blocks[j];
    const auto& b = want.blocks[j];
    ASSERT_EQ(a.scale, b.scale) << "block " << j;
    ASSERT_EQ(a.scale_code, b.scale_code) << "block " << j;
    ASSERT_EQ(a.amax, b.amax) << "block " << j;
    ASSERT_EQ(a.flushed, b.flushed) << "block " << j;
    ASSERT_EQ(a.clipped, b.clipped) << "block " << j;
    ASSERT_EQ(a.scale_underflow, b.scale_underflow) << "block " << j;
  }
  int shown = 0;
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool same_dq = std::isnan(want.dequant[i]) ? std::isnan(dq[i])
                                                     : dq[i] == want.dequant[i] && std::signbit(dq[i]) == std::signbit(want.dequant[i]);
    if (codes[i] == want.codes[i] && same_dq) continue;
    ++bad;
    if (shown++ < 5)
      ADD_FAILURE() << "element " << i << " x=" << x[i] << ": code " << int(codes[i]) << " want " << want.codes[i]
                    << ", dequant " << dq[i] << " want " << want.dequant[i];
  }
  EXPECT_EQ(bad, 0);
  // The ties family holds ties only if every block's multiplier (scale x unit: MXINT8's unit is
  // 2^-6) is the intended 2^-3 (NVFP4's first block, holding the tensor amax, apart).
  if (k.ties) {
    const double unit = c.kind == nf::scheme_kind::m_mx && c.element == nf::format_id::m_i8 ? 0x1.0p-6 : 1.0;
    for (std::size_t j = c.kind == nf::scheme_kind::m_nvfp4 ? 1 : 0; j < want.blocks.size(); ++j)
      ASSERT_EQ(want.blocks[j].scale * unit, 0x1.0p-3) << "block " << j << ": the input's ties are not ties";
  }
}

INSTANTIATE_TEST_SUITE_P(convert_targets, rne_block_codes, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.id(); });

}  // namespace
