// The fused quantizer of the scan path (src/formats/rne_block_quantizer.hpp) against quantize(), the
// definition: for every covered scheme (all registry entries but int4-awq, plus the other MX
// rules, scale formats, axis 0 and an amax floor), shapes whose blocks and vector lanes end
// partially, and inputs read as f64, f32, bf16 and f16, every block statistic (amax, argmax,
// scale, scale code, flushed, clipped, non-finite, scale underflow) must equal quantize()'s
// exactly, every dequantized value must equal quantize()'s, the first index of the largest
// error and the non-finite counts must be equal, and the two error sums must agree within
// the bound stated below. Inputs: seeded normals with outliers, exact zeros, NaN and inf,
// tiny values (scale underflow) and values on exact rounding ties.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "numprobe/base/rng.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/formats/outlier_flushes.hpp"
#include "numprobe/formats/packing.hpp"
#include "src/formats/rne_block_quantizer.hpp"
#include "src/metrics/quant_error_sums.hpp"

namespace nf = numprobe::formats;
namespace nd = numprobe::formats::detail;

namespace {

struct typed_input {
  nd::element_storage type;
  std::vector<std::byte> bytes;
  std::vector<double> values;  // the stored values, exactly
};

typed_input store(const std::vector<double>& x, nd::element_storage type) {
  typed_input t;
  t.type = type;
  for (double v : x) {
    switch (type) {
      case nd::element_storage::m_f64: {
        t.values.push_back(v);
        const auto* p = reinterpret_cast<const std::byte*>(&v);
        t.bytes.insert(t.bytes.end(), p, p + 8);
        break;
      }
      case nd::element_storage::m_f32: {
        const auto f = static_cast<float>(v);
        t.values.push_back(f);
        const auto* p = reinterpret_cast<const std::byte*>(&f);
        t.bytes.insert(t.bytes.end(), p, p + 4);
        break;
      }
      case nd::element_storage::m_bf16: {
        // Truncation to bf16 (any bf16 pattern will do: the value is what was stored).
        const auto u = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16);
        t.values.push_back(std::bit_cast<float>(std::uint32_t{u} << 16));
        const auto* p = reinterpret_cast<const std::byte*>(&u);
        t.bytes.insert(t.bytes.end(), p, p + 2);
        break;
      }
      case nd::element_storage::m_f16: {
        // Rounded through float, as a float tensor cast to half would be. f16_bits, not
        // _Float16: clang < 15 has no _Float16 on x86.
        const std::uint16_t h = nf::f16_bits(static_cast<float>(v));
        t.values.push_back(nf::f16_value(h));
        const auto* p = reinterpret_cast<const std::byte*>(&h);
        t.bytes.insert(t.bytes.end(), p, p + 2);
        break;
      }
    }
  }
  return t;
}

// Seeded normals; every 97th element an outlier (x 60), some exact zeros, NaN, +-inf, tiny
// values (1e-30: scale underflow in e4m3/f16 scales), and a run of exact ties of the element
// grid at the scale a unit amax gives.
std::vector<double> make_input(std::uint64_t seed, std::int64_t n, bool specials) {
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::uint64_t>(i);
    double v = numprobe::normal_at(seed, 1, k);
    if (i % 97 == 5) v *= 60.0;
    if (i % 53 == 7) v = 0.0;
    if (i % 211 == 11) v = 0.125 * std::floor(numprobe::uniform_open01(seed, 2, k) * 48 - 24);
    x[static_cast<std::size_t>(i)] = v;
  }
  if (specials) {
    x[static_cast<std::size_t>(n / 3)] = std::numeric_limits<double>::quiet_NaN();
    x[static_cast<std::size_t>(n / 2)] = std::numeric_limits<double>::infinity();
    x[static_cast<std::size_t>(n / 2 + 1)] = -std::numeric_limits<double>::infinity();
    // A tiny row: its blocks' ideal scales underflow the scale formats.
    for (std::int64_t i = n - n / 7; i < n - n / 7 + 40 && i < n; ++i)
      x[static_cast<std::size_t>(i)] = 1e-30 * numprobe::normal_at(seed, 3, static_cast<std::uint64_t>(i));
  }
  return x;
}

struct fused_result {
  std::vector<nf::block_stats> blocks;
  numprobe::metrics::quant_error_sums sums;
};

fused_result run_fused(const nf::scheme_config& c, const typed_input& in, std::int64_t rows,
                       std::int64_t cols) {
  const auto g = nf::grid_of(c, rows, cols);
  nd::rne_block_quantizer fq(c);
  fq.set_tensor_amax(nd::rne_block_quantizer::finite_amax(in.bytes.data(), in.type, in.values.size()));
  fused_result r;
  r.blocks.resize(static_cast<std::size_t>(g.count()));
  for (std::int64_t br = 0; br < g.grid_rows; ++br) {
    const std::int64_t r0 = br * g.block_rows, nr = std::min(g.block_rows, rows - r0);
    fq.strip(in.bytes.data(), in.type, cols, r0, nr, g.block_cols,
             std::span(r.blocks).subspan(static_cast<std::size_t>(br * g.grid_cols),
                                         static_cast<std::size_t>(g.grid_cols)),
             r.sums);
  }
  // Every dequantized value through the scalar entry point is compared by the caller.
  return r;
}

// Exact equality of a block's position, amax and argmax, scale and counts (the fused path must
// reproduce quantize() bit for bit).
void expect_same_block(const nf::block_stats& a, const nf::block_stats& b) {
  ASSERT_EQ(a.row0, b.row0);
  ASSERT_EQ(a.col0, b.col0);
  ASSERT_EQ(a.amax, b.amax);
  ASSERT_EQ(a.argmax, b.argmax);
  ASSERT_EQ(a.scale, b.scale);
  ASSERT_EQ(a.scale_code, b.scale_code);
  ASSERT_EQ(a.flushed, b.flushed);
  ASSERT_EQ(a.clipped, b.clipped);
  ASSERT_EQ(a.scale_underflow, b.scale_underflow);
}

void check(const std::string& label, const nf::scheme_config& c, const typed_input& in,
           std::int64_t rows, std::int64_t cols) {
  SCOPED_TRACE(label);
  ASSERT_TRUE(nd::rne_block_quantizer::covers(c));
  const auto q = nf::quantize(c, in.values, rows, cols);
  const auto f = run_fused(c, in, rows, cols);
  ASSERT_EQ(f.blocks.size(), q.blocks.size());
  for (std::size_t k = 0; k < q.blocks.size(); ++k) {
    const auto& a = f.blocks[k];
    const auto& b = q.blocks[k];
    SCOPED_TRACE("block " + std::to_string(k));
    ASSERT_NO_FATAL_FAILURE(expect_same_block(a, b));
    ASSERT_EQ(a.rows, b.rows);
    ASSERT_EQ(a.cols, b.cols);
    ASSERT_EQ(a.nonfinite, b.nonfinite);
  }
  // Dequantized values, element by element, through the scalar entry point.
  nd::rne_block_quantizer fq(c);
  fq.set_tensor_amax(nd::rne_block_quantizer::finite_amax(in.bytes.data(), in.type, in.values.size()));
  const auto& g = q.grid;
  double sx = 0, se = 0, emax = -1;
  std::int64_t emax_at = -1, nonfinite_in = 0, nonfinite_out = 0, mismatches = 0;
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const double x = in.values[static_cast<std::size_t>(i)];
    const auto& b = q.blocks[static_cast<std::size_t>((i / cols) / g.block_rows * g.grid_cols +
                                                      (i % cols) / g.block_cols)];
    const double d = q.dequant[static_cast<std::size_t>(i)];
    if (std::isfinite(x)) {
      const double fd = fq.dequant(x, b);
      if (!(fd == d && std::signbit(fd) == std::signbit(d)) && mismatches++ < 5)
        ADD_FAILURE() << "element " << i << " x=" << x << " dequant " << fd << " != " << d;
    }
    if (!std::isfinite(x)) {
      ++nonfinite_in;
      continue;
    }
    if (!std::isfinite(d)) {
      ++nonfinite_out;
      continue;
    }
    const double e = std::fabs(d - x);
    sx += x * x;
    se += e * e;
    if (e > emax) {
      emax = e;
      emax_at = i;
    }
  }
  EXPECT_EQ(f.sums.nonfinite_inputs, nonfinite_in);
  EXPECT_EQ(f.sums.nonfinite_outputs, nonfinite_out);
  EXPECT_EQ(f.sums.max_err, emax);
  EXPECT_EQ(f.sums.max_err_at, emax_at);
  // Both sums add the same n non-negative terms in different orders; each is within (n - 1) u
  // (relative, u = 2^-53) of the exact sum, so they differ by at most 2 n u relative.
  const double n = static_cast<double>(rows * cols), bound = 2.0 * n * 0x1.0p-53;
  EXPECT_LE(std::fabs(f.sums.sum_sq - sx), bound * sx);
  EXPECT_LE(std::fabs(f.sums.sum_sq_err - se), bound * se);
}

std::vector<std::pair<std::string, nf::scheme_config>> covered_configs() {
  std::vector<std::pair<std::string, nf::scheme_config>> out;
  for (const auto& s : nf::all_schemes()) {
    if (!nd::rne_block_quantizer::covers(s.defaults)) continue;
    out.emplace_back(std::string(s.name), s.defaults);
  }
  auto mx = nf::find_scheme("mxfp4").defaults;
  mx.rule = nf::mx_rule::m_ceil;
  out.emplace_back("mxfp4 ceil", mx);
  mx.rule = nf::mx_rule::m_rceil;
  out.emplace_back("mxfp4 rceil", mx);
  auto m8 = nf::find_scheme("mxint8").defaults;
  m8.rule = nf::mx_rule::m_rceil;
  out.emplace_back("mxint8 rceil", m8);
  auto ch = nf::find_scheme("fp8-channel").defaults;
  ch.axis = 0;
  out.emplace_back("fp8-channel axis 0", ch);
  auto g = nf::find_scheme("int4-g128").defaults;
  g.axis = 0;
  g.group = 24;
  out.emplace_back("int4 g24 axis 0", g);
  auto bs = nf::find_scheme("fp8-block128").defaults;
  bs.scale_format = nf::format_id::m_bf16;
  bs.block_rows = 7;
  bs.block_cols = 10;
  out.emplace_back("block2d 7x10 bf16 scale", bs);
  auto e5 = nf::find_scheme("fp8-block128").defaults;
  e5.element = nf::format_id::m_e5m2fnuz;
  e5.scale_format = nf::format_id::m_e8m0;
  out.emplace_back("block2d e5m2fnuz e8m0 scale", e5);
  auto fz = nf::find_scheme("nvfp4").defaults;
  fz.element = nf::format_id::m_e3m2;
  out.emplace_back("nvfp4-style e3m2", fz);
  // Every combination of the convention axes (conventions.hpp) of NVFP4 and MX.
  for (const char* s : {"nvfp4", "mxfp4", "mxfp8", "mxint8"})
    for (const auto& v : nf::convention_variants(nf::find_scheme(s).defaults))
      out.emplace_back(std::string(s) + " " + nf::conventions_text(v), v);
  return out;
}

TEST(rne_block_quantizer, covers_what_it_should) {
  EXPECT_TRUE(nd::rne_block_quantizer::covers(nf::find_scheme("nvfp4").defaults));
  EXPECT_TRUE(nd::rne_block_quantizer::covers(nf::find_scheme("fp8-block128").defaults));
  EXPECT_FALSE(nd::rne_block_quantizer::covers(nf::find_scheme("int4-awq").defaults));
  auto c = nf::find_scheme("nvfp4").defaults;
  c.round = nf::rounding::m_stochastic;
  EXPECT_FALSE(nd::rne_block_quantizer::covers(c));
  c = nf::find_scheme("nvfp4").defaults;
  c.over = nf::overflow::m_nan;
  EXPECT_FALSE(nd::rne_block_quantizer::covers(c));
  c = nf::find_scheme("none").defaults;
  c.element = nf::format_id::m_bf16;
  EXPECT_FALSE(nd::rne_block_quantizer::covers(c));
}

TEST(rne_block_quantizer, equals_quantize_for_every_covered_scheme) {
  // 130 x 203: partial 128-row and 128-col blocks, partial groups of 16/32 and vector lanes
  // (the general path); 40 x 256: whole row blocks (the unmasked row path), except the rows
  // holding NaN/inf, which take the general path.
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{130, 203}, {40, 256}}) {
    const auto x = make_input(21, rows * cols, true);
    for (const auto& [name, c] : covered_configs())
      for (auto type : {nd::element_storage::m_f64, nd::element_storage::m_f32, nd::element_storage::m_bf16,
                        nd::element_storage::m_f16})
        check(name + " input " + std::to_string(static_cast<int>(type)) + " cols " +
                  std::to_string(cols),
              c, store(x, type), rows, cols);
  }
}

TEST(rne_block_quantizer, equals_quantize_without_specials_and_on_ties) {
  // No NaN/inf (every row of whole blocks takes the unmasked row path), and two rows of exact
  // e2m1/e4m3 ties at scale 1 (amax 6 or 448 per block of 16).
  const std::int64_t rows = 19, cols = 256;
  auto x = make_input(5, rows * cols, false);
  for (std::int64_t c = 0; c < cols; ++c) {
    x[static_cast<std::size_t>(c)] = c % 16 == 0 ? 6.0 : 0.25 * static_cast<double>(c % 16);
    x[static_cast<std::size_t>(cols + c)] = c % 16 == 0 ? 448.0 : 0.5 + static_cast<double>(c % 8) * 16.0 + 8.0;
  }
  for (const auto& [name, c] : covered_configs())
    check(name, c, store(x, nd::element_storage::m_f64), rows, cols);
}

// Tie-adversarial inputs for the conventions: per block of 16, amax 6 2^n (n from -12 up: block
// scales cross the e4m3 subnormal boundary 2^-6..2^-9 under a tensor scale set by a large
// block), amax just below and above 6 2^n, and elements on E2M1 rounding midpoints after
// scaling (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 times the block's unit), and their fp32
// neighbours.
std::vector<double> tie_input(std::int64_t rows, std::int64_t cols) {
  std::vector<double> x(static_cast<std::size_t>(rows * cols));
  const double mids[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const std::int64_t blk = i / 16, k = i % 16;
    const double unit = std::ldexp(1.0, static_cast<int>(blk % 24) - 12);
    double v = mids[k % 7] * unit;
    if (k == 0) v = 6.0 * unit * (blk % 3 == 0 ? 1.0 : blk % 3 == 1 ? 1.0 - 0x1.0p-24 : 1.0 + 0x1.0p-23);
    if (k % 5 == 3) v = std::nextafter(static_cast<float>(v), blk % 2 ? 0.0f : 1e30f);
    x[static_cast<std::size_t>(i)] = (i % 3 == 1) ? -v : v;
  }
  x[0] = 6.0 * 448.0 * 4.0;  // the tensor amax: small blocks' scales become e4m3 subnormals
  return x;
}

TEST(rne_block_quantizer, equals_quantize_on_convention_ties) {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{24, 256}, {13, 200}}) {
    const auto x = tie_input(rows, cols);
    for (const auto& [name, c] : covered_configs())
      for (auto type : {nd::element_storage::m_f32, nd::element_storage::m_f64})
        check(name + " ties cols " + std::to_string(cols), c, store(x, type), rows, cols);
  }
}

TEST(rne_block_quantizer, all_zero_and_all_nonfinite_tensors) {
  const std::int64_t rows = 3, cols = 40;
  std::vector<double> zeros(rows * cols, 0.0);
  std::vector<double> nans(rows * cols, std::numeric_limits<double>::quiet_NaN());
  for (const auto& [name, c] : covered_configs()) {
    check(name + " zeros", c, store(zeros, nd::element_storage::m_f64), rows, cols);
    check(name + " nans", c, store(nans, nd::element_storage::m_f32), rows, cols);
  }
}

// strip() with a summary (the scan's call) against quantize()'s blocks of each strip: the
// totals, the flush blocks (blocks of more than one element under a scale that did not
// underflow, holding a finite element and at least one flush) and the first flush block with
// the most flushes, then the largest amax, restated here from quantize()'s blocks; the blocks
// the summary and a moved max_err_at point to must equal quantize()'s; the sums must equal
// those of the call without a summary, bit for bit.
TEST(rne_block_quantizer, strip_summary_equals_the_rules_over_quantize_blocks) {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{130, 203}, {40, 256}}) {
    auto x = make_input(33, rows * cols, true);
    // Rows 2 and 3 repeat one 16-element pattern (an outlier and small values that flush), so
    // many flush blocks tie on both flush count and amax: the first must win.
    for (std::int64_t i = 2 * cols; i < 4 * cols; ++i)
      x[static_cast<std::size_t>(i)] = i % 16 == 0 ? 100.0 : 0.001 * static_cast<double>(1 + i % 5);
    for (const auto& [name, c] : covered_configs())
      for (auto type : {nd::element_storage::m_f64, nd::element_storage::m_bf16, nd::element_storage::m_f16}) {
        SCOPED_TRACE(name + " input " + std::to_string(static_cast<int>(type)) + " cols " + std::to_string(cols));
        const auto in = store(x, type);
        const auto q = nf::quantize(c, in.values, rows, cols);
        const auto g = q.grid;
        const auto plain = run_fused(c, in, rows, cols);
        nd::rne_block_quantizer fq(c);
        fq.set_tensor_amax(nd::rne_block_quantizer::finite_amax(in.bytes.data(), in.type, in.values.size()));
        numprobe::metrics::quant_error_sums sums;
        const bool scaled = c.kind != nf::scheme_kind::m_none;
        for (std::int64_t br = 0; br < g.grid_rows; ++br) {
          const std::int64_t r0 = br * g.block_rows, nr = std::min(g.block_rows, rows - r0);
          // Poisoned: entries the summary does not point to may stay as they are.
          std::vector<nf::block_stats> blocks(static_cast<std::size_t>(g.grid_cols));
          for (auto& b : blocks) b.amax = b.scale = std::numeric_limits<double>::quiet_NaN();
          nd::strip_summary sm;
          sm.flushed = sm.worst = 12345;
          const std::int64_t at_before = sums.max_err_at;
          fq.strip(in.bytes.data(), in.type, cols, r0, nr, g.block_cols, blocks, sums, &sm);
          nd::strip_summary want;
          want.worst = -1;
          const nf::block_stats* worst = nullptr;
          for (std::int64_t j = 0; j < g.grid_cols; ++j) {
            const auto& b = q.blocks[static_cast<std::size_t>(br * g.grid_cols + j)];
            want.flushed += b.flushed;
            want.clipped += b.clipped;
            want.scale_underflow += b.scale_underflow ? 1 : 0;
            // Outlier flushes by the one definition, on quantize()'s element-wise result.
            const std::int32_t of = scaled ? nf::outlier_block_flushes(
                                                 c, b, cols, [&](std::int64_t i) { return in.values[static_cast<std::size_t>(i)]; },
                                                 [&](std::int64_t i, double) { return q.dequant[static_cast<std::size_t>(i)] == 0.0; })
                                           : 0;
            if (of <= 0) continue;
            ++want.outlier_blocks;
            want.outlier_flushed += of;
            if (!worst || of > want.worst_outlier_flushed || (of == want.worst_outlier_flushed && b.amax > worst->amax)) {
              worst = &b;
              want.worst = j;
              want.worst_outlier_flushed = of;
            }
          }
          ASSERT_EQ(sm.flushed, want.flushed) << "strip " << br;
          ASSERT_EQ(sm.clipped, want.clipped) << "strip " << br;
          ASSERT_EQ(sm.scale_underflow, want.scale_underflow) << "strip " << br;
          ASSERT_EQ(sm.outlier_blocks, want.outlier_blocks) << "strip " << br;
          ASSERT_EQ(sm.outlier_flushed, want.outlier_flushed) << "strip " << br;
          ASSERT_EQ(sm.worst_outlier_flushed, want.worst_outlier_flushed) << "strip " << br;
          ASSERT_EQ(sm.worst, want.worst) << "strip " << br;
          std::vector<std::int64_t> shown;
          if (sm.worst >= 0) shown.push_back(sm.worst);
          if (sums.max_err_at != at_before) shown.push_back((sums.max_err_at % cols) / g.block_cols);
          for (const auto j : shown) {
            const auto& a = blocks[static_cast<std::size_t>(j)];
            const auto& b = q.blocks[static_cast<std::size_t>(br * g.grid_cols + j)];
            ASSERT_NO_FATAL_FAILURE(expect_same_block(a, b));
          }
        }
        EXPECT_EQ(std::bit_cast<std::uint64_t>(sums.sum_sq), std::bit_cast<std::uint64_t>(plain.sums.sum_sq));
        EXPECT_EQ(std::bit_cast<std::uint64_t>(sums.sum_sq_err), std::bit_cast<std::uint64_t>(plain.sums.sum_sq_err));
        EXPECT_EQ(sums.max_err_at, plain.sums.max_err_at);
      }
  }
}

}  // namespace
