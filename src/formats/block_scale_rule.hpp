#pragma once
// The block quantizer's scale rule: each block's scale and scale code from its amax, exactly
// as quantize() (scheme_quantize.cpp) derives them, one block at a time or, where the scalar
// rule reduces to vector operations, a whole row of blocks four at a time.
//
// Private to numprobe (the block quantizer): not installed.
#include <cstddef>
#include <cstdint>

#include "numprobe/formats/scheme.hpp"
#include "src/formats/rne_lane_codec.hpp"

namespace numprobe::formats::detail {

struct block_scale_rule {
  scheme_config c;
  double elem_max = 0.0;      // the element format's largest finite value
  double max_value = 0.0;     // elem_max * unit
  double tensor_scale = 1.0;  // NVFP4's s_t

  // b.scale, b.scale_code and b.scale_underflow from b.amax.
  void operator()(block_stats& b) const;
  // NVFP4's s_t from the tensor's finite amax, as quantize() derives it (1 for an all-zero
  // tensor); other kinds keep 1.
  void set_tensor_amax(double amax);
};

// The vector forms of the rule: NVFP4 with e4m3fn block scales (a division, then the e4m3fn
// RNE rounding of rne_lane_codec.hpp, which equals round_to(e4m3fn, ., RNE, saturate) on
// finite non-negative values) and MX with the floor rule (the amax's exponent field).
// Anything else is scalar.
struct scale_plan {
  enum class kind : std::uint8_t { m_scalar, m_nvfp4_e4m3, m_mx_floor } k = kind::m_scalar;
  double denom = 1.0, tensor_scale = 1.0;  // NVFP4: amax / denom, denom = 6 s_t (exact)
  element_rounding e4m3;
  std::int64_t emax = 0;  // MX: the element's largest exponent
};

[[nodiscard]] scale_plan plan_of(const block_scale_rule& rule);

struct row_scratch;

// The scales of a row's nb blocks from their amax (w.amax: finite, >= 0) into w.scale, w.code
// and w.underflow (0 or -1, a vector mask).
void row_scales(const scale_plan& plan, const block_scale_rule& rule, std::int64_t nb, row_scratch& w);

// block_coder's multipliers of the row's nb blocks (from w.scale), four at a time, into w.eff,
// w.div (s, or inf for s = 0) and w.inv (1/s where s is a normal power of two with a normal
// reciprocal, else 0). Returns the largest eff.
double row_multipliers(std::int64_t nb, double unit, row_scratch& w);

}  // namespace numprobe::formats::detail
