// rne_block_quantizer::code_strip (rne_block_quantizer.hpp): the block row's codes and
// dequantized values, as quantize() stores them, for `convert --write`.
//
// The blocks (amax, scale, scale code, counts) come from strip() with an observer that keeps
// nothing. Each element is then coded again with the same lane operations (block_coder's
// quotient, element_rounding::round: rne_lane_codec.hpp), and the rounded value y, a point of
// the element grid, is turned into its bit pattern:
//   minifloat, |y| >= min normal: the double pattern of |y| shifted right by 52 - mb holds
//     (exponent << mb) | fraction, and the rebias is one subtraction of (1023 - bias) << mb;
//   minifloat, |y| < min normal: |y| / min_subnormal, an integer below 2^mb (exact: the
//     divisor is a power of two), read from the low bits of |y| * 2^-e_min_sub + 2^52;
//   integer: y + 1.5 * 2^52 holds y's two's complement in its low bits (|y| < 2^51);
// then the sign bit from y's sign, at bit `bits - 1` (fp6: 6 bits of information in a byte). A
// zero of an fnuz format has no sign (its 0x80 is the NaN), nor has an integer zero; their dequantized value is then +0, as
// decode(code) * unit * scale gives. dq = y * (unit * scale) is quantize()'s decode(code) * unit
// * scale (both exact: rne_lane_codec.hpp). Two cases take quantize()'s own scalar steps
// instead: non-finite inputs (NaN codes as the format's NaN or 0; +-inf as t = +-inf saturated)
// and blocks of scale 0, where quantize() sets t = +0 (the lanes' x / inf would keep x's sign).
#include <cmath>
#include <cstdint>
#include <limits>

#include "numprobe/formats/format.hpp"
#include "src/formats/rne_block_quantizer.hpp"
#include "src/formats/rne_block_quantizer_strip.hpp"

namespace numprobe::formats::detail {
// A named namespace, not an anonymous one: code_strip_typed (a member of a class with linkage)
// captures these types in its lambdas, and g++ warns (-Wsubobject-linkage) when such a type is
// file-local in a file that a unity build includes rather than compiles.
namespace code_strip_impl {

// An error observer that keeps nothing: code_strip takes only strip()'s block statistics.
struct no_errors {
  struct lanes {
    void add(v4d, v4d) {}
    void add(v4d, v4d, v4i) {}
    template <class Segments>
    std::int64_t add_to(no_errors&, std::int64_t, const Segments&) const {
      return -1;
    }
  };
};

// The element format's bit layout, for y -> code.
struct code_layout {
  bool integer = false, unsigned_zero = false;
  std::uint64_t sign_shift = 0, rebias = 0, frac_shift = 0, code_mask = 0;
  double min_normal = 0.0, inv_min_subnormal = 1.0;

  explicit code_layout(format_id f) {
    const auto& e = info(f);
    integer = !e.is_float;
    unsigned_zero = integer || e.nan == nan_style::m_fnuz;
    code_mask = (std::uint64_t{1} << e.bits) - 1;  // fp6: 6 bits of information in a byte
    if (integer) return;
    sign_shift = static_cast<std::uint64_t>(e.bits - 1);
    frac_shift = static_cast<std::uint64_t>(52 - e.mantissa_bits);
    rebias = static_cast<std::uint64_t>(1023 - e.bias) << e.mantissa_bits;
    min_normal = e.min_normal;
    inv_min_subnormal = 1.0 / e.min_subnormal;  // a power of two: exact
  }

  // The codes of four rounded values y, and y with an unsigned zero's sign cleared.
  [[nodiscard]] v4u code(v4d& y) const {
    if (integer) {
      const v4u c = reinterpret_cast<v4u>(y + splat(0x1.8p52)) & splat_u(code_mask);
      y = c == splat_u(0) ? splat(0.0) : y;
      return c;
    }
    const v4u uy = reinterpret_cast<v4u>(y);
    const v4d a = vabs(y);
    const v4u normal = (reinterpret_cast<v4u>(a) >> frac_shift) - splat_u(rebias);
    const v4u sub = reinterpret_cast<v4u>(a * splat(inv_min_subnormal) + splat(0x1.0p52)) & splat_u(code_mask);
    const v4u mag = a < splat(min_normal) ? sub : normal;
    v4u c = mag | ((uy >> 63) << sign_shift);
    if (unsigned_zero) {
      const v4i zero = mag == splat_u(0);
      c = zero ? splat_u(0) : c;
      y = zero ? splat(0.0) : y;
    }
    return c;
  }
};

}  // namespace code_strip_impl

using code_strip_impl::code_layout;
using code_strip_impl::no_errors;

template <class S>
void rne_block_quantizer::code_strip_typed(const S& src, std::int64_t cols, std::int64_t row0,
                                           std::int64_t nrows, std::int64_t block_cols,
                                           std::span<block_stats> blocks, std::uint8_t* codes,
                                           double* dequant) const {
  const format_id f = m_rule.c.element;
  const code_layout layout(f);
  const bool has_nan = info(f).nan != nan_style::m_none;
  const auto nb = static_cast<std::int64_t>(blocks.size());
  // quantize()'s element_coder::code (scheme_quantize.cpp) for one element, for the lanes the
  // vector steps leave to it.
  const auto reference = [&](std::int64_t i, double x, const block_stats& b, const block_coder& bc) {
    if (std::isnan(x)) {
      codes[i] = static_cast<std::uint8_t>(has_nan ? encode(f, x) : 0u);
      dequant[i] = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    const double t = b.scale == 0.0 ? 0.0 : bc.quotient(splat(x))[0];
    const std::uint32_t c = encode(f, t, rounding::m_nearest_even, overflow::m_saturate);
    codes[i] = static_cast<std::uint8_t>(c);
    dequant[i] = decode(f, c) * m_unit * b.scale;
  };
  for (std::int64_t r = row0; r < row0 + nrows; ++r) {
    for (std::int64_t j = 0; j < nb; ++j) {
      const block_stats& b = blocks[static_cast<std::size_t>(j)];
      const block_coder bc(b, m_unit, m_er);
      const v4d eff = splat(bc.eff);
      const std::int64_t at = r * cols + j * block_cols, w = std::min(block_cols, cols - j * block_cols);
      const bool zero_scale = b.scale == 0.0;
      const auto four = [&](std::int64_t i, v4d x, std::int64_t n) {
        const v4i fin = vabs(x) < splat(k_inf);
        if (zero_scale || (fin[0] & fin[1] & fin[2] & fin[3]) == 0) {
          for (std::int64_t l = 0; l < n; ++l) reference(i + l, x[l], b, bc);
          return;
        }
        v4d y = m_er.round(bc.quotient(x));
        const v4u c = layout.code(y);
        const v4d dq = y * eff;
        for (std::int64_t l = 0; l < n; ++l) {
          codes[i + l] = static_cast<std::uint8_t>(c[l]);
          dequant[i + l] = dq[l];
        }
      };
      std::int64_t k = 0;
      for (; k + 4 <= w; k += 4) four(at + k, src.load(at + k), 4);
      if (k < w) four(at + k, load_part(src, at + k, w - k), w - k);
    }
  }
}

void rne_block_quantizer::code_strip(const void* data, element_storage in, std::int64_t cols,
                                     std::int64_t row0, std::int64_t nrows, std::int64_t block_cols,
                                     std::span<block_stats> blocks, std::uint8_t* codes,
                                     double* dequant) const {
  no_errors none;
  strip(data, in, cols, row0, nrows, block_cols, blocks, none);
  with_source(data, in, [&](const auto& src) {
    code_strip_typed(src, cols, row0, nrows, block_cols, blocks, codes, dequant);
  });
}

}  // namespace numprobe::formats::detail
