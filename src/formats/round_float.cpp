// Fast exact RNE from float for the formats kernels keep state in. Each path is integer
// arithmetic on the fp32 bit pattern; test_round_float.cpp checks it equals round_to.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "numprobe/formats/format.hpp"

namespace numprobe::formats {
namespace {

// RNE that drops the low `drop` bits of an fp32 pattern (bf16: 16, tf32: 13). A carry out of
// the mantissa bumps the exponent, and out of the largest binade gives inf: the IEEE overflow
// that is these formats' default. fp32 subnormals round on the same grid, which is right
// because bf16/tf32 share fp32's exponent range.
float round_low_bits(float x, int drop) {
  if (std::isnan(x)) return std::copysign(std::numeric_limits<float>::quiet_NaN(), x);
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t half_minus_one = (1u << (drop - 1)) - 1u;
  const std::uint32_t lsb = (u >> drop) & 1u;
  u = (u + half_minus_one + lsb) & ~((1u << drop) - 1u);
  return std::bit_cast<float>(u);
}

// RNE of fp32 to fp16's grid, returned as float: integer rounding of the fp32 significand to
// the fp16 quantum 2^(max(e, -14) - 10), so subnormal fp16 results need no special case.
float round_f16(float x) {
  if (std::isnan(x)) return std::copysign(std::numeric_limits<float>::quiet_NaN(), x);
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = u & 0x80000000u;
  const std::uint32_t mag = u & 0x7FFFFFFFu;
  if (mag >= 0x7F800000u) return x;  // inf
  const int biased = static_cast<int>(mag >> 23);
  // fp16 quantum exponent: max(e, -14) - 10, with e the unbiased exponent of x.
  const int e = biased == 0 ? -126 : biased - 127;
  const int qe = (e < -14 ? -14 : e) - 10;
  const std::uint32_t m = biased == 0 ? (mag & 0x7FFFFFu) : ((mag & 0x7FFFFFu) | 0x800000u);
  const int lsb_exp = (biased == 0 ? -126 : e) - 23;
  const int s = qe - lsb_exp;  // >= 13 for every float
  std::uint32_t q = s >= 32 ? 0u : m >> s;
  const std::uint32_t rem = s >= 32 ? m : m & ((1u << s) - 1u);
  const std::uint32_t half = s >= 33 ? 0xFFFFFFFFu : (s == 32 ? 0x80000000u : 1u << (s - 1));
  if (rem > half || (rem == half && (q & 1u))) ++q;
  float v = std::ldexp(static_cast<float>(q), qe);  // q < 2^12: exact
  if (v > 65504.0f) v = std::numeric_limits<float>::infinity();
  return sign ? -v : v;
}

}  // namespace

float round_float_to(format_id id, float x) {
  switch (id) {
    case format_id::m_f32:
    case format_id::m_f64: return x;
    case format_id::m_bf16: return round_low_bits(x, 16);
    case format_id::m_tf32: return round_low_bits(x, 13);
    case format_id::m_f16: return round_f16(x);
    default: return static_cast<float>(round_to(id, static_cast<double>(x)));
  }
}

}  // namespace numprobe::formats
