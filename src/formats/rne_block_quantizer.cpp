// The block quantizer's configuration (rne_block_quantizer.hpp): what it covers, its
// constants, and single dequantized values. The strip kernels are templates on the error
// observer (rne_block_quantizer_strip.hpp).
#include "src/formats/rne_block_quantizer.hpp"

#include <cmath>
#include <limits>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/outlier_flushes.hpp"
#include "src/formats/fast_codec.hpp"

namespace numprobe::formats::detail {

element_rounding rounding_of(format_id f) {
  const auto& e = info(f);
  element_rounding er;
  er.integer = !e.is_float;
  er.max = e.max_finite;
  er.lowest = e.lowest;
  if (er.integer) {
    er.sub_magic = 0x1.0p52;
  } else {
    er.min_normal = e.min_normal;
    er.sub_magic = e.min_subnormal * 0x1.0p52;
    er.drop = static_cast<std::uint64_t>(52 - e.mantissa_bits);
    er.half_m1 = (std::uint64_t{1} << (er.drop - 1)) - 1;
    er.low_mask = (std::uint64_t{1} << er.drop) - 1;
  }
  return er;
}

bool rne_block_quantizer::covers(const scheme_config& c) {
  if (c.round != rounding::m_nearest_even || c.over != overflow::m_saturate) return false;
  if (c.kind == scheme_kind::m_asym) return false;
  const auto& e = info(c.element);
  if (e.storage_bits > 8 || c.element == format_id::m_e8m0 || !has_rne_bit_codec(c.element))
    return false;
  if (e.is_float) return e.min_subnormal > 0 && e.mantissa_bits >= 1 && e.is_signed;
  return e.is_signed;
}

rne_block_quantizer::rne_block_quantizer(const scheme_config& c) {
  if (!covers(c)) throw_input_error("scheme", "the fused quantizer does not cover this scheme");
  const auto& e = info(c.element);
  if (c.kind == scheme_kind::m_mx && c.element == format_id::m_i8) m_unit = 0x1.0p-6;
  m_rule.c = c;
  m_rule.elem_max = e.max_finite;
  m_rule.max_value = e.max_finite * m_unit;
  m_flush_ratio = flush_ratio(c);
  m_er = rounding_of(c.element);
  m_er.division = c.conv.division;
}

void rne_block_quantizer::set_tensor_amax(double amax) {
  m_rule.set_tensor_amax(amax);
  m_er.tensor_scale = m_rule.tensor_scale;
  if (m_rule.c.kind == scheme_kind::m_tensor) m_tensor_amax = amax;
}

double rne_block_quantizer::dequant(double x, const block_stats& b) const {
  if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  if (b.scale == 0.0) return 0.0;  // quantize(): t = +0, code +0, dequant +0
  const block_coder bc(b, m_unit, m_er);
  const double dq = (m_er.round(bc.quotient(splat(x))) * splat(bc.eff))[0];
  // A zero code of an integer or fnuz format has no sign: its value is +0.
  if (dq == 0.0 && (m_er.integer || info(m_rule.c.element).nan == nan_style::m_fnuz)) return 0.0;
  return dq;
}

}  // namespace numprobe::formats::detail
