// `--dist ties`: inputs that separate quantizers which agree on random data (issue 17). Random
// values almost never sit on a rounding midpoint, so a quantizer that divides by the scale and
// one that multiplies by a rounded reciprocal code the same; on midpoints they do not. Every
// element is a pure function of (seed, scheme geometry, flat index), like the other
// distributions, so any block regenerates alone.
//
// Each block of the scheme's grid is one of four kinds (by a hash of the seed and the block):
// - a tie block (half of them): the block's amax is max_elem x s, so the block scale rounds to
//   s exactly (s an e4m3 value for NVFP4, a power of two for MX, any for the others), and the
//   other elements are midpoints of adjacent element values times s (e2m1: 0.25, 0.75, 1.25,
//   1.75, 2.5, 3.5, 5), or element values themselves, with random signs;
// - a scale-boundary block: amax / max_elem spread log-uniformly over [2^-10, 2^-4], so the
//   NVFP4 block scale crosses e4m3's subnormal boundary (2^-6; subnormals down to 2^-9);
// - (NVFP4) a scale-midpoint block: the ideal block scale 2^-30 above an e4m3 rounding midpoint,
//   where one rounding from double and fp32 step by step part;
// - an amax-boundary block: amax within a few units of 2^-24 of max_elem x 2^n, of
//   1.75 x 2^n (the element mantissa rounding of MX's `even` rule) and of 2^n, where the scale
//   rules (floor, ceil, rceil, even, nearest) and the e4m3 rounding of NVFP4 scales part;
// - the anchor, block 0: for NVFP4 its amax is exactly 6 x 448 x 0.8125, so the tensor scale
//   s_t = amax / (6 x 448) is exactly 0.8125 (in double and in fp32) and every block scale
//   above is chosen relative to it.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/formats/format.hpp"
#include "probes/quant/quant_inputs.hpp"

namespace numprobe::probes {
namespace {

constexpr std::uint64_t k_stream_block = 0x71e1;
constexpr std::uint64_t k_stream_elem = 0x71e2;
// 13/16: 1/s_t is inexact in fp32, and for 6 of the 8 e4m3 mantissas of s_b the reciprocal
// conventions' multipliers f32(f32(1/s_t)/s_b) and rcp(f32(s_b rcp(f32(1/s_t)))) differ.
constexpr double k_tensor_scale = 0.8125;

namespace nf = formats;

// The element format's positive finite values, ascending (it has at most 8 bits).
std::vector<double> positive_values(nf::format_id id) {
  const auto& f = nf::info(id);
  if (f.storage_bits > 8)
    throw_input_error("--dist", fmt::format("ties needs an element format of at most 8 bits (got {})", f.name));
  std::vector<double> v;
  for (std::uint32_t c = 0; c < (1u << f.storage_bits); ++c) {
    const double x = nf::decode(id, c);
    if (std::isfinite(x) && x > 0) v.push_back(x);
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

struct tie_plan {
  nf::block_grid grid;
  nf::scheme_kind kind;
  std::vector<double> values, midpoints;  // positive, ascending
  double max_elem = 0.0;
  bool is_signed = true;  // e8m0 is not: its elements stay positive (a negative would be NaN)
};

tie_plan plan_of(const nf::scheme_config& c, std::int64_t rows, std::int64_t cols) {
  tie_plan p;
  p.grid = nf::grid_of(c, rows, cols);
  p.kind = c.kind;
  p.values = positive_values(c.element);
  p.max_elem = p.values.back();
  p.is_signed = nf::info(c.element).is_signed;
  for (std::size_t i = 0; i + 1 < p.values.size(); ++i) p.midpoints.push_back(0.5 * (p.values[i] + p.values[i + 1]));
  p.midpoints.insert(p.midpoints.begin(), 0.5 * p.values.front());  // between 0 and the smallest
  return p;
}

std::uint64_t pick(std::uint64_t seed, std::uint64_t stream, std::uint64_t n, std::uint64_t count) {
  return static_cast<std::uint64_t>(uniform_open01(seed, stream, n) * static_cast<double>(count)) % count;
}

// The scale s a tie block's amax (max_elem x s) rounds to exactly.
double tie_scale(const tie_plan& p, std::uint64_t seed, std::uint64_t block) {
  const int e = static_cast<int>(pick(seed, k_stream_block, 4 * block + 1, 9)) - 4;  // 2^-4 .. 2^4
  if (p.kind == nf::scheme_kind::m_mx) return std::ldexp(1.0, e);
  // An e4m3 normal value (3 fraction bits) for NVFP4; the same grid serves the other kinds.
  const double mant = 1.0 + static_cast<double>(pick(seed, k_stream_block, 4 * block + 2, 8)) / 8.0;
  return std::ldexp(mant, e);
}

double tie_element(const tie_plan& p, std::uint64_t seed, std::uint64_t block, std::int64_t pos,
                   std::int64_t amax_pos, std::uint64_t flat) {
  const double sign = p.is_signed && uniform_open01(seed, k_stream_elem, 2 * flat) < 0.5 ? -1.0 : 1.0;
  const std::uint64_t kind = pick(seed, k_stream_block, 4 * block, 8);
  const std::uint64_t r = pick(seed, k_stream_elem, 2 * flat + 1, 1u << 30);
  const bool nvfp4 = p.kind == nf::scheme_kind::m_nvfp4;
  // NVFP4's tensor scale: 0.8125 exactly (amax_t = 6 x 448 x 0.8125). Not a power of two, so
  // 1/s_t is inexact in fp32 and the reciprocal conventions part from one another and from
  // division. Every product below keeps at most 11 significant bits: exact in fp32.
  const double st = nvfp4 ? k_tensor_scale : 1.0;
  double amax = 0.0, s = 1.0;
  if (block == 0) {
    s = nvfp4 ? 448.0 * st : 1.0;
    amax = p.max_elem * s;
  } else if (kind < 4) {
    s = tie_scale(p, seed, block) * st;
    amax = p.max_elem * s;
  } else if (kind == 5 && nvfp4) {
    // The ideal block scale 2^-30 above an e4m3 rounding midpoint: one rounding from double
    // goes up, fp32 step by step (f32(amax) drops the 2^-30) lands on the tie and goes to even.
    const int e = static_cast<int>(pick(seed, k_stream_block, 4 * block + 1, 9)) - 4;
    const double mid = std::ldexp(1.0 + (2.0 * static_cast<double>(pick(seed, k_stream_block, 4 * block + 2, 8)) + 1.0) / 16.0, e);
    amax = p.max_elem * mid * st * (1.0 + 0x1p-30);
    s = mid * st;
  } else if (kind < 6) {
    // Block scales across e4m3's subnormal boundary: amax / (max_elem s_t) in [2^-10, 2^-4].
    const double u = uniform_open01(seed, k_stream_block, 4 * block + 3);
    amax = p.max_elem * st * std::exp2(-10.0 + 6.0 * u);
    s = amax / p.max_elem;
  } else {
    // amax a few units of 2^-24 away from a rule's boundary.
    const int n = static_cast<int>(pick(seed, k_stream_block, 4 * block + 1, 7)) - 3;
    const double base[] = {p.max_elem, 1.75, 1.0};
    const double b = base[pick(seed, k_stream_block, 4 * block + 2, 3)];
    const int j = static_cast<int>(pick(seed, k_stream_block, 4 * block + 3, 5)) - 2;
    amax = std::ldexp(b, n) * st * (1.0 + j * 0x1p-24);
    s = amax / p.max_elem;
  }
  if (pos == amax_pos) return sign * amax;
  // Below the amax: a midpoint (a rounding tie once scaled) three times in four, else a value.
  const auto& pool = (r & 3) != 0 ? p.midpoints : p.values;
  double m = pool[(r >> 2) % pool.size()];
  if (m >= p.max_elem) m = p.midpoints.back();
  return sign * m * s;
}

}  // namespace

std::vector<double> make_tie_input(std::uint64_t seed, const formats::scheme_config& c, std::int64_t rows,
                                   std::int64_t cols) {
  const tie_plan p = plan_of(c, rows, cols);
  std::vector<double> x(static_cast<std::size_t>(rows * cols));
  const auto& g = p.grid;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t col = 0; col < cols; ++col) {
      const std::int64_t br = r / g.block_rows, bc = col / g.block_cols;
      const auto block = static_cast<std::uint64_t>(br * g.grid_cols + bc);
      const std::int64_t extent_r = std::min(g.block_rows, rows - br * g.block_rows);
      const std::int64_t extent_c = std::min(g.block_cols, cols - bc * g.block_cols);
      const std::int64_t pos = (r - br * g.block_rows) * extent_c + (col - bc * g.block_cols);
      const auto amax_pos = static_cast<std::int64_t>(pick(seed, k_stream_block, 4 * block + 5,
                                                           static_cast<std::uint64_t>(extent_r * extent_c)));
      const auto flat = static_cast<std::uint64_t>(r * cols + col);
      x[static_cast<std::size_t>(flat)] = tie_element(p, seed, block, pos, amax_pos, flat);
    }
  return x;
}

}  // namespace numprobe::probes
