#include "src/providers/host_dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>

namespace numprobe {
namespace {

// One format's normal range and layout in the terms the bit path needs.
struct layout16 {
  int mantissa_bits;  // 7 (bf16) or 10 (fp16)
  int bias;           // 127 or 15
  double min_normal, max_finite;
};

constexpr layout16 k_bf16{7, 127, 0x1.0p-126, 0x1.fep127};
constexpr layout16 k_f16{10, 15, 0x1.0p-14, 65504.0};

// x rounded to nearest even at the format's precision by integer rounding of the double's bits
// (carries into the exponent included), then repacked; false when the result is not a normal
// finite value of the format (zero, subnormal, overflow, inf, NaN: the codec's cases).
bool normal_code(const layout16& f, double x, std::uint16_t& out) {
  const double a = std::fabs(x);
  if (!(a >= f.min_normal && a <= f.max_finite)) return false;
  const int sh = 52 - f.mantissa_bits;
  auto b = std::bit_cast<std::uint64_t>(x);
  b += ((std::uint64_t{1} << (sh - 1)) - 1) + ((b >> sh) & 1);
  b &= ~((std::uint64_t{1} << sh) - 1);
  const double y = std::bit_cast<double>(b);
  if (std::fabs(y) > f.max_finite) return false;  // rounded up past the largest finite value
  const std::uint64_t sign = b >> 63;
  const std::uint64_t exp = ((b >> 52) & 0x7FFu) - 1023 + static_cast<std::uint64_t>(f.bias);
  const std::uint64_t man = (b >> sh) & ((std::uint64_t{1} << f.mantissa_bits) - 1);
  out = static_cast<std::uint16_t>((sign << 15) | (exp << f.mantissa_bits) | man);
  return true;
}

std::vector<double> make_table(formats::format_id id) {
  std::vector<double> t(65536);
  for (std::uint32_t c = 0; c < 65536; ++c) t[c] = formats::decode(id, c);
  return t;
}

}  // namespace

std::uint16_t encode16(formats::format_id id, double x) {
  const layout16& f = id == formats::format_id::m_bf16 ? k_bf16 : k_f16;
  std::uint16_t code = 0;
  if (normal_code(f, x, code)) return code;
  return static_cast<std::uint16_t>(formats::encode(id, x));
}

void encode16_all(formats::format_id id, std::span<const double> x, std::vector<std::uint16_t>& out) {
  out.resize(x.size());
  const auto n = static_cast<std::int64_t>(x.size());
  const double* src = x.data();
  std::uint16_t* dst = out.data();
#pragma omp parallel for schedule(static) if (n > (std::int64_t{1} << 16))
  for (std::int64_t i = 0; i < n; ++i) dst[i] = encode16(id, src[i]);
}

double decode16(formats::format_id id, std::uint16_t code) {
  static const std::vector<double> bf16 = make_table(formats::format_id::m_bf16);
  static const std::vector<double> f16 = make_table(formats::format_id::m_f16);
  return (id == formats::format_id::m_bf16 ? bf16 : f16)[code];
}

}  // namespace numprobe
