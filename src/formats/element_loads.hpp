#pragma once
// Element loads of the block quantizer: f64, f32, bf16 and f16 arrays read in place (a memory
// map) and widened exactly to doubles, four at a time or one by one.
//
// Private to numprobe (the block quantizer's kernels): not installed.
#include <bit>
#include <cstdint>
#include <cstring>

#include "src/formats/simd_v4.hpp"

namespace numprobe::formats::detail {

template <class T>
struct source;

template <>
struct source<double> {
  const double* p;
  v4d load(std::int64_t i) const {
    v4d v;
    std::memcpy(&v, p + i, sizeof v);
    return v;
  }
  double at(std::int64_t i) const { return p[i]; }
};

template <>
struct source<float> {
  const float* p;
  v4d load(std::int64_t i) const {
    v4f v;
    std::memcpy(&v, p + i, sizeof v);
    return __builtin_convertvector(v, v4d);
  }
  double at(std::int64_t i) const {
    float v;
    std::memcpy(&v, p + i, sizeof v);
    return v;
  }
};

struct bf16_tag {};
template <>
struct source<bf16_tag> {
  const std::uint16_t* p;
  v4d load(std::int64_t i) const {
    v4u16 h;
    std::memcpy(&h, p + i, sizeof h);
    const v4u32 w = __builtin_convertvector(h, v4u32) << 16;
    return __builtin_convertvector(reinterpret_cast<v4f>(w), v4d);
  }
  double at(std::int64_t i) const {
    std::uint16_t h;
    std::memcpy(&h, p + i, sizeof h);
    return std::bit_cast<float>(std::uint32_t{h} << 16);
  }
};

// binary16 bits -> float, exact (every half is a float). Portable: no _Float16, which older
// compilers (clang < 15 on x86) reject; with F16C (x86-64-v3) the vector loads use vcvtph2ps.
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
    const float v = static_cast<float>(m) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

inline v4f half4_to_float(const std::uint16_t* p) {
  v4f r;
#if defined(__F16C__)
  std::uint64_t bits;
  std::memcpy(&bits, p, sizeof bits);
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
  std::memcpy(&r, &f, sizeof r);
#else
  for (int l = 0; l < 4; ++l) {
    std::uint16_t h;
    std::memcpy(&h, p + l, sizeof h);
    r[l] = half_to_float(h);
  }
#endif
  return r;
}

struct f16_tag {};

template <>
struct source<f16_tag> {
  const std::uint16_t* p;
  v4d load(std::int64_t i) const { return __builtin_convertvector(half4_to_float(p + i), v4d); }
  double at(std::int64_t i) const {
    std::uint16_t h;
    std::memcpy(&h, p + i, sizeof h);
    return static_cast<double>(half_to_float(h));
  }
};

// Elements [i, i + n), n < 4, in the low lanes (the others 0).
template <class S>
v4d load_part(const S& s, std::int64_t i, std::int64_t n) {
  v4d v = splat(0.0);
  for (std::int64_t l = 0; l < n; ++l) v[l] = s.at(i + l);
  return v;
}

// f(source) with the source of the array `data` stored as `in` (an element_storage).
template <class Storage, class F>
decltype(auto) with_source(const void* data, Storage in, F&& f) {
  switch (in) {
    case Storage::m_f32: return f(source<float>{static_cast<const float*>(data)});
    case Storage::m_bf16: return f(source<bf16_tag>{static_cast<const std::uint16_t*>(data)});
    case Storage::m_f16: return f(source<f16_tag>{static_cast<const std::uint16_t*>(data)});
    default: return f(source<double>{static_cast<const double*>(data)});
  }
}

}  // namespace numprobe::formats::detail
