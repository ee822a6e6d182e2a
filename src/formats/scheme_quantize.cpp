// quantize(): blocks, scales and element codes for every scheme, with per-block statistics.
// Everything is computed in double from the definitions in NUMERICS.md; products such as
// value(code) * s_b * s_t are exact in double, so `dequant` holds the true dequantized values.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/formats/scheme.hpp"
#include "src/formats/convention_math.hpp"

namespace numprobe::formats {
namespace {

using detail::store_scale;

constexpr double k_nan_dequant = std::numeric_limits<double>::quiet_NaN();  // a NaN element's dequant
constexpr std::uint64_t k_stochastic_stream = 0x71a57;  // "quant" rounding bits

// Rounds to an integer by the rounding mode (ties to even for RNE).
double round_integer_mode(double t, rounding r, std::uint64_t random_bits) {
  if (!std::isfinite(t)) return t;
  switch (r) {
    case rounding::m_toward_zero: return std::trunc(t);
    case rounding::m_stochastic: {
      const double fl = std::floor(t);
      const double u = static_cast<double>(random_bits >> 11) * 0x1.0p-53;
      return u < t - fl ? fl + 1.0 : fl;
    }
    default: return std::nearbyint(t);
  }
}

// The largest finite magnitude (0 when there is none), the same value as a plain loop of
// `if (isfinite(v)) amax = max(amax, |v|)`: a non-finite element contributes +0, which never
// raises a max that starts at +0, and max is exact and order-free on non-negative values, so
// four running maxima combine to the same result. Out of line with a select instead of a
// branch because inlined into quantize() GCC kept the running max on the stack, a
// store-to-load chain per element (perf, bench_scan: ~15% of a scan).
[[gnu::noinline]] double finite_amax(std::span<const double> values) {
  double m[4] = {0.0, 0.0, 0.0, 0.0};
  const std::size_t n = values.size();
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (std::size_t l = 0; l < 4; ++l) {
      const double a = std::fabs(values[i + l]);
      m[l] = std::max(m[l], std::isfinite(a) ? a : 0.0);
    }
  for (; i < n; ++i) {
    const double a = std::fabs(values[i]);
    m[0] = std::max(m[0], std::isfinite(a) ? a : 0.0);
  }
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

struct block_view {
  const scheme_config& c;
  std::span<const double> x;
  std::int64_t cols;
  block_stats& b;
  template <class F>
  void each(F&& f) const {  // f(flat index)
    for (std::int64_t r = b.row0; r < b.row0 + b.rows; ++r)
      for (std::int64_t q = b.col0; q < b.col0 + b.cols; ++q) f(r * cols + q);
  }
};

// Codes one element t = v / scale; returns the code and updates the block's counters.
class element_coder {
 public:
  element_coder(const scheme_config& c, quant_result& out)
      : m_c(c), m_info(info(c.element)), m_out(out) {
    // MXINT8 elements are fixed point with 6 fraction bits (OCP MX v1.0, emax 0).
    if (c.kind == scheme_kind::m_mx && c.element == format_id::m_i8) m_unit = 0x1.0p-6;
  }

  // r: a reciprocal division's fp32 multiplier (convention_math.hpp), 0 for exact division.
  void code(std::int64_t i, double v, double scale, block_stats& b, float r = 0.0f) const {
    const std::uint64_t bits = m_c.round == rounding::m_stochastic
                                   ? counter_hash(m_c.seed, k_stochastic_stream, i)
                                   : 0;
    if (std::isnan(v)) {
      // Never let a NaN become a number silently: formats without NaN code 0, dequant is NaN.
      m_out.codes[i] = m_info.nan == nan_style::m_none ? 0u : encode(m_c.element, v);
      m_out.dequant[i] = k_nan_dequant;
      return;
    }
    const double t =
        r != 0.0f ? detail::reciprocal_scaled(v, r) : (scale == 0.0 ? 0.0 : v / scale) / m_unit;
    if (std::isfinite(v) && (t > m_info.max_finite || t < m_info.lowest)) ++b.clipped;
    const std::uint32_t code = encode(m_c.element, t, m_c.round, m_c.over, bits);
    m_out.codes[i] = code;
    const double dq = decode(m_c.element, code) * m_unit * scale;
    m_out.dequant[i] = dq;
    if (std::isfinite(v) && v != 0.0 && dq == 0.0) ++b.flushed;
  }

  [[nodiscard]] double max_value() const { return m_info.max_finite * m_unit; }

 private:
  const scheme_config& m_c;
  const format_info& m_info;
  quant_result& m_out;
  double m_unit = 1.0;
};

void scan_block(const block_view& v) {
  v.b.amax = 0.0;
  v.b.argmax = -1;
  // Partial blocks are zero-padded before amax in DeepSeek-V3; padding zeros cannot raise an
  // amax, so scanning only the real elements is the same thing.
  v.each([&](std::int64_t i) {
    const double a = std::fabs(v.x[i]);
    if (!std::isfinite(a)) {
      ++v.b.nonfinite;
      return;
    }
    if (a > v.b.amax || v.b.argmax < 0) {
      v.b.amax = a;
      v.b.argmax = i;
    }
  });
}

// tensor, channel, token, group, block2d: s = max(amax, floor) / max_elem, stored in the
// scale format.
void quantize_symmetric(const block_view& v, const element_coder& coder, quant_result& out) {
  const double amax = std::max(v.b.amax, v.c.amax_floor);
  double s = 1.0;
  if (amax > 0) {
    s = store_scale(v.c.scale_format, amax / coder.max_value());
    v.b.scale_underflow = s == 0.0;
  } else {
    s = store_scale(v.c.scale_format, 1.0);  // an all-zero block: any scale codes it exactly
  }
  v.b.scale = s;
  v.b.scale_code = encode(v.c.scale_format, s, rounding::m_nearest_even, overflow::m_saturate);
  v.each([&](std::int64_t i) { coder.code(i, v.x[i], s, v.b); });
}

// OCP MX: X from the block amax by the named rule, clamped to e8m0's [-127, 127].
void quantize_mx(const block_view& v, const element_coder& coder) {
  const auto& e = info(v.c.element);
  const int emax = v.c.element == format_id::m_i8 ? 0 : std::ilogb(e.max_finite);
  const double amax = v.b.amax;
  int x = -127;
  if (amax > 0) {
    x = detail::mx_exponent(v.c.rule, amax, coder.max_value(), emax, detail::mx_mantissa_bits(v.c));
    v.b.scale_underflow = x < -127;
    x = std::clamp(x, -127, 127);
  }
  const double s = std::ldexp(1.0, x);
  v.b.scale = s;
  v.b.scale_code = static_cast<std::uint32_t>(x + 127);
  v.each([&](std::int64_t i) { coder.code(i, v.x[i], s, v.b); });
}

// NVFP4: s_b = e4m3(amax_b / (6 s_t)), element = e2m1(v / (s_b s_t)).
void quantize_nvfp4(const block_view& v, const element_coder& coder, double s_t) {
  const double elem_max = coder.max_value();
  const double sb = detail::nvfp4_block_scale(v.c, v.b.amax, elem_max, s_t);
  v.b.scale_code = encode(v.c.scale_format, sb, rounding::m_nearest_even, overflow::m_saturate);
  v.b.scale_underflow = v.b.amax > 0 && sb == 0.0;  // the block scale itself flushed
  v.b.scale = sb * s_t;                              // exact: 4 x 24 significant bits
  const float r = detail::element_multiplier(v.c.conv.division, sb, s_t);
  v.each([&](std::int64_t i) { coder.code(i, v.x[i], v.b.scale, v.b, r); });
}

// AWQ: s = max(max - min, 1e-5) / 15, z = clamp(-round(min / s), 0, 15), q = clamp(round(v / s)
// + z, 0, 15), dequant (q - z) s.
void quantize_asym(const block_view& v, quant_result& out) {
  const auto& e = info(v.c.element);
  const double qmax = e.max_finite;
  double mn = 0.0, mx = 0.0;
  bool any = false;
  v.each([&](std::int64_t i) {
    const double a = v.x[i];
    if (!std::isfinite(a)) return;
    mn = any ? std::min(mn, a) : a;
    mx = any ? std::max(mx, a) : a;
    any = true;
  });
  // AWQ clamps the range at 1e-5 so a constant group still gets a usable scale.
  const double s = store_scale(v.c.scale_format, std::max(mx - mn, 1e-5) / qmax);
  v.b.scale = s;
  v.b.scale_code = encode(v.c.scale_format, s, rounding::m_nearest_even, overflow::m_saturate);
  v.b.scale_underflow = s == 0.0;
  const double z = s == 0.0 ? 0.0 : std::clamp(-std::nearbyint(mn / s), 0.0, qmax);
  v.b.zero_point = static_cast<int>(z);
  v.each([&](std::int64_t i) {
    const double a = v.x[i];
    if (std::isnan(a)) {
      out.codes[i] = 0;
      out.dequant[i] = k_nan_dequant;
      return;
    }
    const double t = (s == 0.0 ? 0.0 : a / s) + z;
    if (std::isfinite(a) && (t > qmax || t < 0.0)) ++v.b.clipped;
    const std::uint64_t bits = v.c.round == rounding::m_stochastic
                                   ? counter_hash(v.c.seed, k_stochastic_stream, i)
                                   : 0;
    // AWQ rounds v / s first and then adds z: with an odd z, rounding v / s + z instead would
    // send ties the other way.
    const double r = round_integer_mode(s == 0.0 ? 0.0 : a / s, v.c.round, bits);
    const auto q = static_cast<std::uint32_t>(std::clamp(r + z, 0.0, qmax));
    out.codes[i] = q;
    const double dq = (static_cast<double>(q) - z) * s;
    out.dequant[i] = dq;
    if (std::isfinite(a) && a != 0.0 && dq == 0.0) ++v.b.flushed;
  });
}

}  // namespace

quant_result quantize(const scheme_config& c, std::span<const double> values, std::int64_t rows,
                      std::int64_t cols) {
  validate(c, rows, cols);
  if (static_cast<std::int64_t>(values.size()) != rows * cols)
    throw_input_error("shape", "tensor has " + std::to_string(values.size()) +
                                   " values, shape needs " + std::to_string(rows * cols));
  quant_result out;
  out.config = c;
  out.grid = grid_of(c, rows, cols);
  out.codes.resize(values.size());
  out.dequant.resize(values.size());
  out.blocks.resize(static_cast<std::size_t>(out.grid.count()));
  const element_coder coder(c, out);

  if (c.kind == scheme_kind::m_nvfp4) {
    const double amax_t = finite_amax(values);
    // s_t = amax / (6 * 448), held in fp32; an all-zero tensor keeps s_t = 1 (no division by 0).
    const double scale_max = info(c.scale_format).max_finite;
    out.tensor_scale =
        amax_t > 0 ? round_to(format_id::m_f32, amax_t / (coder.max_value() * scale_max)) : 1.0;
  }

  const auto& g = out.grid;
  // Blocks are independent (each writes only its own elements and stats; stochastic rounding
  // bits depend on the element index alone), so the result does not depend on the threads.
#pragma omp parallel for schedule(dynamic, 64)
  for (std::int64_t k = 0; k < g.count(); ++k) {
    const std::int64_t br = k / g.grid_cols, bc = k % g.grid_cols;
    block_stats& b = out.blocks[static_cast<std::size_t>(k)];
    b.row0 = br * g.block_rows;
    b.col0 = bc * g.block_cols;
    b.rows = std::min(g.block_rows, rows - b.row0);
    b.cols = std::min(g.block_cols, cols - b.col0);
    const block_view v{c, values, cols, b};
    scan_block(v);
    switch (c.kind) {
      case scheme_kind::m_none:
        b.scale = 1.0;
        v.each([&](std::int64_t i) { coder.code(i, values[i], 1.0, b); });
        break;
      case scheme_kind::m_mx: quantize_mx(v, coder); break;
      case scheme_kind::m_nvfp4: quantize_nvfp4(v, coder, out.tensor_scale); break;
      case scheme_kind::m_asym: quantize_asym(v, out); break;
      default: quantize_symmetric(v, coder, out); break;
    }
  }
  for (const auto& b : out.blocks) {
    out.flushed += b.flushed;
    out.clipped += b.clipped;
    out.scale_underflow_blocks += b.scale_underflow ? 1 : 0;
  }
  for (double v : values) {
    out.nan_inputs += std::isnan(v) ? 1 : 0;
    out.inf_inputs += std::isinf(v) ? 1 : 0;
  }
  return out;
}

}  // namespace numprobe::formats
