#pragma once
// Four-lane vectors of doubles (and their integer masks) for the block quantizer's kernels:
// GCC vector extensions, AVX2 on x86-64-v3, SSE2 pairs otherwise. The same IEEE operations
// either way, so no result depends on the target.
//
// Private to numprobe (the block quantizer and the error sums that observe it): not installed.
#include <cstdint>
#include <limits>
#ifdef __AVX__
#include <immintrin.h>
#endif

namespace numprobe::formats::detail {

using v4d = double __attribute__((vector_size(32)));
using v4i = std::int64_t __attribute__((vector_size(32)));
using v4u = std::uint64_t __attribute__((vector_size(32)));
using v4f = float __attribute__((vector_size(16)));
using v4u32 = std::uint32_t __attribute__((vector_size(16)));
using v4u16 = std::uint16_t __attribute__((vector_size(8)));
using v4i32 = std::int32_t __attribute__((vector_size(16)));

inline constexpr double k_inf = std::numeric_limits<double>::infinity();
inline constexpr std::uint64_t k_sign = std::uint64_t{1} << 63;

inline v4d splat(double v) { return v4d{v, v, v, v}; }
inline v4u splat_u(std::uint64_t v) { return v4u{v, v, v, v}; }
inline v4i splat_i(std::int64_t v) { return v4i{v, v, v, v}; }
inline v4d vabs(v4d x) { return reinterpret_cast<v4d>(reinterpret_cast<v4u>(x) & ~splat_u(k_sign)); }
inline v4d vmax(v4d a, v4d b) { return a > b ? a : b; }
// Largest lane, without branches (lanes are never NaN here).
inline double hmax(v4d v) {
  const v4d m = vmax(v, __builtin_shufflevector(v, v, 2, 3, 0, 1));
  return vmax(m, __builtin_shufflevector(m, m, 1, 0, 3, 2))[0];
}
inline double hsum(v4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }
inline std::int64_t hsum(v4i v) { return (v[0] + v[1]) + (v[2] + v[3]); }
// a * b + c with one rounding where the target has FMA (x86-64-v3), as GCC contracts the
// sums' `s += a * b` there; two roundings otherwise. Written out so that the full-block row
// path makes the same choice whatever the compiler's contraction setting.
inline v4d fmadd(v4d a, v4d b, v4d c) {
#ifdef __FMA__
  return reinterpret_cast<v4d>(_mm256_fmadd_pd(reinterpret_cast<__m256d>(a),
                                               reinterpret_cast<__m256d>(b),
                                               reinterpret_cast<__m256d>(c)));
#else
  return a * b + c;
#endif
}

// Lanes [0, n) set: the valid lanes of a vector holding the last n < 4 elements of a segment.
inline v4i lanes_below(std::int64_t n) { return v4i{0, 1, 2, 3} < splat_i(n); }

// One bit per lane of a == m.
inline unsigned equal_bits(v4d a, double m) {
  const v4i eq = a == splat(m);
#ifdef __AVX__
  return static_cast<unsigned>(_mm256_movemask_pd(reinterpret_cast<__m256d>(eq)));
#else
  return (eq[0] ? 1u : 0u) | (eq[1] ? 2u : 0u) | (eq[2] ? 4u : 0u) | (eq[3] ? 8u : 0u);
#endif
}

}  // namespace numprobe::formats::detail
