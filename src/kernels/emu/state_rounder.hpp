#pragma once
// Rounding of values computed in arithmetic type T to a state's storage dtype, shared by the
// emulated looped softmax, flash-decoding and fp8 paths. Identity rounding is detected once, so
// fp32 states in float arithmetic cost nothing in hot loops.
#include <cmath>
#include <type_traits>

#include "numprobe/formats/format.hpp"

namespace numprobe::emu {

template <class T>
struct state_rounder {
  formats::format_id id;
  bool identity;

  explicit state_rounder(formats::format_id f)
      : id(f), identity(f == formats::format_id::m_f64 ||
                        (std::is_same_v<T, float> && f == formats::format_id::m_f32)) {}

  [[nodiscard]] T operator()(T x) const {
    if (identity) return x;
    if constexpr (std::is_same_v<T, float>) {
      return formats::round_float_to(id, x);
    } else {
      if (id == formats::format_id::m_f32) return static_cast<double>(static_cast<float>(x));
      return formats::round_to(id, x);
    }
  }
};

// A float accumulator that keeps only `mantissa_bits` explicit fraction bits, the rest
// truncated (toward zero): the model of an fp8 MMA accumulator whose alignment shifter drops
// the low bits of each addend (DeepSeek-V3 reports ~14 bits retained on H800). Truncation, not
// rounding, because the dropped bits are simply shifted out: the bias compounds with length.
[[nodiscard]] inline double truncate_mantissa(double x, int mantissa_bits) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  int e = 0;
  const double f = std::frexp(x, &e);  // x = f * 2^e, |f| in [0.5, 1)
  const double scaled = std::ldexp(f, mantissa_bits + 1);
  return std::ldexp(std::trunc(scaled), e - mantissa_bits - 1);
}

}  // namespace numprobe::emu
