// The block quantizer's whole-array element reads (rne_block_quantizer.hpp): the finite amax
// of a tensor (NVFP4's s_t, the `tensor` scale) and single elements, on the loads of
// element_loads.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "src/formats/element_loads.hpp"
#include "src/formats/rne_block_quantizer.hpp"

namespace numprobe::formats::detail {
namespace {
using v8f = float __attribute__((vector_size(32)));
using v8u32 = std::uint32_t __attribute__((vector_size(32)));

// The finite amax of float-valued elements in eight float lanes: |x| and max are exact in
// float, so this is the double result.
template <class Load8, class Load1>
double finite_amax_f(std::size_t n, Load8 load8, Load1 load1) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  v8f m = v8f{} + 0.0f;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8f a = reinterpret_cast<v8f>(reinterpret_cast<v8u32>(load8(i)) & 0x7FFFFFFFu);
    m = a < inf && a > m ? a : m;
  }
  float r = 0.0f;
  for (int l = 0; l < 8; ++l) r = std::max(r, m[l]);
  for (; i < n; ++i) {
    const double a = std::fabs(load1(i));
    if (a < k_inf) r = std::max(r, static_cast<float>(a));
  }
  return r;
}

// The largest finite |x| of n 16-bit floats (bf16, f16), as its bit pattern, 16 elements at
// a time in integer lanes: |x| is the pattern without the sign bit, a non-negative float's
// pattern orders as its value does, and the pattern is finite when below `inf_bits` (the
// exponent field all ones), so the integer maximum of the finite patterns is the pattern of
// the finite maximum. (0 when there is none: +0.)
std::uint16_t finite_amax_bits(const std::byte* bytes, std::size_t n, std::uint16_t inf_bits) {
  using v16u16 = std::uint16_t __attribute__((vector_size(32)));
  using v16i16 = std::int16_t __attribute__((vector_size(32)));
  v16u16 m = v16u16{} + 0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v16u16 h;
    std::memcpy(&h, bytes + 2 * i, sizeof h);
    const v16u16 a = h & 0x7FFF;
    // Signed compare: both sides are below 0x8000.
    const v16u16 fin = reinterpret_cast<v16u16>(reinterpret_cast<v16i16>(a) < static_cast<std::int16_t>(inf_bits));
    const v16u16 k = a & fin;
    m = k > m ? k : m;
  }
  std::uint16_t r = 0;
  for (int l = 0; l < 16; ++l) r = std::max<std::uint16_t>(r, m[l]);
  for (; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, bytes + 2 * i, sizeof h);
    const auto a = static_cast<std::uint16_t>(h & 0x7FFF);
    if (a < inf_bits) r = std::max(r, a);
  }
  return r;
}

}  // namespace

double rne_block_quantizer::finite_amax(const void* data, element_storage in, std::size_t n) {
  const auto* bytes = static_cast<const std::byte*>(data);
  switch (in) {
    case element_storage::m_f32:
      return finite_amax_f(
          n,
          [&](std::size_t i) {
            v8f v;
            std::memcpy(&v, bytes + 4 * i, sizeof v);
            return v;
          },
          [&](std::size_t i) { return element(data, in, i); });
    case element_storage::m_bf16:    // finite: exponent field below all ones (0x7F80)
    case element_storage::m_f16: {  // finite: below 0x7C00
      const std::uint16_t bits = finite_amax_bits(bytes, n, in == element_storage::m_bf16 ? 0x7F80 : 0x7C00);
      return element(&bits, in, 0);
    }
    default: break;
  }
  // f64: four lanes of doubles.
  const source<double> src{static_cast<const double*>(data)};
  v4d m = splat(0.0);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const v4d a = vabs(src.load(static_cast<std::int64_t>(i)));
    m = vmax(m, a < splat(k_inf) ? a : splat(0.0));
  }
  double r = hmax(m);
  for (; i < n; ++i) {
    const double a = std::fabs(src.at(static_cast<std::int64_t>(i)));
    if (a < k_inf) r = std::max(r, a);
  }
  return r;
}

double rne_block_quantizer::element(const void* data, element_storage in, std::size_t i) {
  return with_source(data, in, [&](const auto& src) { return src.at(static_cast<std::int64_t>(i)); });
}

}  // namespace numprobe::formats::detail
