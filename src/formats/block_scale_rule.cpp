// The block quantizer's scale rule (block_scale_rule.hpp).
#include "src/formats/block_scale_rule.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "src/formats/convention_math.hpp"
#include "src/formats/row_scratch.hpp"

namespace numprobe::formats::detail {
// The block's scale exactly as quantize() (scheme_quantize.cpp) derives it.
void block_scale_rule::operator()(block_stats& b) const {
  switch (c.kind) {
    case scheme_kind::m_none: b.scale = 1.0; return;
    case scheme_kind::m_mx: {
      const int emax = c.element == format_id::m_i8 ? 0 : std::ilogb(elem_max);
      int x = -127;
      if (b.amax > 0) {
        x = mx_exponent(c.rule, b.amax, max_value, emax, mx_mantissa_bits(c));
        b.scale_underflow = x < -127;
        x = std::clamp(x, -127, 127);
      }
      b.scale = std::ldexp(1.0, x);
      b.scale_code = static_cast<std::uint32_t>(x + 127);
      return;
    }
    case scheme_kind::m_nvfp4: {
      const double sb = nvfp4_block_scale(c, b.amax, max_value, tensor_scale);
      b.scale_code = encode(c.scale_format, sb, rounding::m_nearest_even, overflow::m_saturate);
      b.scale_underflow = b.amax > 0 && sb == 0.0;
      b.scale = sb * tensor_scale;
      return;
    }
    default: {
      const double amax = std::max(b.amax, c.amax_floor);
      double s = 1.0;
      if (amax > 0) {
        s = store_scale(c.scale_format, amax / max_value);
        b.scale_underflow = s == 0.0;
      } else {
        s = store_scale(c.scale_format, 1.0);
      }
      b.scale = s;
      b.scale_code = encode(c.scale_format, s, rounding::m_nearest_even, overflow::m_saturate);
      return;
    }
  }
}

void block_scale_rule::set_tensor_amax(double amax) {
  if (c.kind != scheme_kind::m_nvfp4) return;
  // quantize(): s_t = amax / (6 * 448), held in fp32; an all-zero tensor keeps s_t = 1.
  const double scale_max = info(c.scale_format).max_finite;
  tensor_scale = amax > 0 ? round_to(format_id::m_f32, amax / (max_value * scale_max)) : 1.0;
}

scale_plan plan_of(const block_scale_rule& rule) {
  scale_plan plan;
  // The NVFP4 vector form is the default floor and arithmetic; other conventions are scalar.
  if (rule.c.kind == scheme_kind::m_nvfp4 && rule.c.scale_format == format_id::m_e4m3fn &&
      rule.c.conv.floor == scale_floor::m_subnormal && rule.c.conv.arith == scale_arith::m_double) {
    plan.k = scale_plan::kind::m_nvfp4_e4m3;
    plan.denom = rule.max_value * rule.tensor_scale;
    plan.tensor_scale = rule.tensor_scale;
    plan.e4m3 = rounding_of(format_id::m_e4m3fn);
  } else if (rule.c.kind == scheme_kind::m_mx && rule.c.rule == mx_rule::m_floor) {
    plan.k = scale_plan::kind::m_mx_floor;
    plan.emax = rule.c.element == format_id::m_i8 ? 0 : std::ilogb(rule.elem_max);
  }
  return plan;
}

void row_scales(const scale_plan& plan, const block_scale_rule& rule, std::int64_t nb, row_scratch& w) {
  std::int64_t j0 = 0;
  if (plan.k == scale_plan::kind::m_nvfp4_e4m3) {
    for (; j0 + 4 <= nb; j0 += 4) {
      v4d amax;
      std::memcpy(&amax, &w.amax[static_cast<std::size_t>(j0)], sizeof amax);
      const v4d sb = plan.e4m3.round(amax / splat(plan.denom));
      const v4d sc = sb * splat(plan.tensor_scale);
      std::memcpy(&w.scale[static_cast<std::size_t>(j0)], &sc, sizeof sc);
      const v4i under = (amax > splat(0.0)) & (sb == splat(0.0));
      std::memcpy(&w.underflow[static_cast<std::size_t>(j0)], &under, sizeof under);
      // The e4m3fn code of the value sb: a normal's exponent and mantissa fields, rebiased;
      // a subnormal's count of 2^-9 quanta (read from sb * 512 + 2^52, exact).
      const v4u u = reinterpret_cast<v4u>(sb);
      const v4u normal = (u >> 49) - splat_u(std::uint64_t{1023 - 7} << 3);
      const v4u sub = reinterpret_cast<v4u>(sb * splat(512.0) + splat(0x1.0p52)) -
                      splat_u(std::bit_cast<std::uint64_t>(0x1.0p52));
      const v4i code = reinterpret_cast<v4i>(sb >= splat(0x1.0p-6) ? normal : sub);
      std::memcpy(&w.code[static_cast<std::size_t>(j0)], &code, sizeof code);
    }
  } else if (plan.k == scale_plan::kind::m_mx_floor) {
    for (; j0 < nb; ++j0) {
      const auto jj = static_cast<std::size_t>(j0);
      const double a = w.amax[jj];
      if (a != 0.0 && a < 0x1.0p-1022) break;  // a double subnormal: the scalar rule
      std::int64_t x = -127;
      bool under = false;
      if (a > 0) {
        x = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(a) >> 52) - 1023 - plan.emax;
        under = x < -127;
        x = std::clamp<std::int64_t>(x, -127, 127);
      }
      w.scale[jj] = std::bit_cast<double>(static_cast<std::uint64_t>(x + 1023) << 52);
      w.code[jj] = x + 127;
      w.underflow[jj] = under;
    }
  }
  for (; j0 < nb; ++j0) {
    const auto jj = static_cast<std::size_t>(j0);
    block_stats b;
    b.amax = w.amax[jj];
    rule(b);
    w.scale[jj] = b.scale;
    w.code[jj] = b.scale_code;
    w.underflow[jj] = b.scale_underflow;
  }
}

double row_multipliers(std::int64_t nb, double unit, row_scratch& w) {
  // block_coder's rule: a normal power of two 2^(e - 1023) with a normal reciprocal, whose
  // reciprocal is 2^(1023 - e), biased exponent 2046 - e (0: divide instead). Four blocks at a
  // time (the same values as the scalar loop after it, which takes the rest).
  double max_eff = 0.0;
  std::int64_t j1 = 0;
  {
    v4d vmax_eff = splat(0.0);
    for (; j1 + 4 <= nb; j1 += 4) {
      const auto jj = static_cast<std::size_t>(j1);
      v4d sc;
      std::memcpy(&sc, &w.scale[jj], sizeof sc);
      const v4d eff = splat(unit) * sc;
      const v4d div = sc == splat(0.0) ? splat(k_inf) : sc;
      const v4u u = reinterpret_cast<v4u>(sc);
      const v4i e = reinterpret_cast<v4i>((u >> 52) & splat_u(0x7FF));
      const v4i pow2 = ((u & splat_u((std::uint64_t{1} << 52) - 1)) == splat_u(0)) & (e >= splat_i(1)) &
                       (e <= splat_i(2045)) & (sc > splat(0.0));
      const v4i inv = pow2 & ((splat_i(2046) - e) << 52);  // the bits of 0.0 otherwise
      std::memcpy(&w.eff[jj], &eff, sizeof eff);
      std::memcpy(&w.div[jj], &div, sizeof div);
      std::memcpy(&w.inv[jj], &inv, sizeof inv);
      vmax_eff = vmax(vmax_eff, eff);
    }
    max_eff = hmax(vmax_eff);
  }
  for (std::int64_t j = j1; j < nb; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    const double s = w.scale[jj];
    w.eff[jj] = unit * s;
    w.div[jj] = s == 0.0 ? k_inf : s;
    const auto u = std::bit_cast<std::uint64_t>(s);
    const std::uint64_t e = (u >> 52) & 0x7FF;
    const bool pow2 = (u & ((std::uint64_t{1} << 52) - 1)) == 0 && e >= 1 && e <= 2045 && s > 0;
    w.inv[jj] = pow2 ? std::bit_cast<double>((2046 - e) << 52) : 0.0;
    max_eff = std::max(max_eff, w.eff[jj]);
  }
  return max_eff;
}

}  // namespace numprobe::formats::detail
