#pragma once
// The arithmetic of each quantization convention (numprobe/formats/conventions.hpp), in one
// place for quantize() (scheme_quantize.cpp) and the scan path's block quantizer
// (block_scale_rule.cpp, rne_lane_codec.hpp), so the two cannot drift apart.
//
// fp32 steps are written in float arithmetic (IEEE binary32, round to nearest even, no
// contraction: each operation below is a single +, * or / whose result is stored to a float).
//
// Private to numprobe: not installed.
#include "numprobe/formats/scheme.hpp"

namespace numprobe::formats::detail {

// Rounds an ideal scale to the scale format. e8m0 rounds *up* to a power of two (DeepSeek-V3
// ue8m0, cuBLAS) so the block max never clips; the others round to nearest, as a framework
// storing an fp32-computed scale in that dtype does.
[[nodiscard]] double store_scale(format_id f, double s);

// The MX shared exponent X (before e8m0's clamp to [-127, 127]) of a block with amax > 0
// under rule r: emax the element's largest exponent, max_value its largest value (times the
// MXINT8 unit), mbits its mantissa bits (the `even` rule's rounding).
[[nodiscard]] int mx_exponent(mx_rule r, double amax, double max_value, int emax, int mbits);
// The mantissa bits the `even` rule rounds to: the element's; MXINT8 (fixed point 1.6) 6.
[[nodiscard]] int mx_mantissa_bits(const scheme_config& c);

// NVFP4's stored block scale s_b (before the tensor scale) of a block with amax >= 0 under
// c.conv.floor and c.conv.arith; max_value is the element's largest value (6), s_t the fp32
// tensor scale.
[[nodiscard]] double nvfp4_block_scale(const scheme_config& c, double amax, double max_value,
                                       double s_t);

// The fp32 multiplier r of a block under a reciprocal division (t = f32(f32(x) * r)), from the
// stored block scale s_b and the tensor scale s_t; 0 for exact division, for s_b = 0 (the
// block codes +-0 as under exact division) and where r would not be a positive finite float
// (an fp32 overflow or flush of 1 / s_t: those blocks are coded by exact division).
[[nodiscard]] float element_multiplier(scale_division d, double sb, double s_t);

// The scaled element t = f32(f32(x) * r) (r from element_multiplier, non-zero).
[[nodiscard]] inline double reciprocal_scaled(double x, float r) {
  return static_cast<double>(static_cast<float>(x) * r);
}

}  // namespace numprobe::formats::detail
