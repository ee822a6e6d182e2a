// RNE encode of the <= 8-bit formats from the double's bit pattern, and decode by table.
//
// Why it is exact: a double is sign | E (11 bits) | 52 fraction bits. For a target normal,
// the target code's magnitude is the double's (E << mb | top mb fraction bits) rounded to
// nearest-even at bit 52 - mb, minus the exponent rebias (1023 - bias) << mb; a carry out of
// the fraction moves into the exponent, exactly as a rounding up to the next binade does, and
// nothing bounds the exponent, so the overflow test runs on the value rounded with an
// unbounded exponent (format.hpp's convention). Below the target's min normal the quantum is
// fixed (2^(1 - bias - mb)) and the count of quanta is the significand shifted right with the
// same integer RNE. Only integer operations are used, so the floating-point environment does
// not matter. Specials (NaN, inf, overflow codes per policy) are taken from the reference
// codec once, so their conventions cannot drift.
#include "src/formats/fast_codec.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace numprobe::formats::detail {
namespace {

constexpr std::uint64_t k_sign = std::uint64_t{1} << 63;
constexpr std::uint64_t k_exp_all = std::uint64_t{0x7FF} << 52;
constexpr std::uint64_t k_frac = (std::uint64_t{1} << 52) - 1;
constexpr std::size_t k_policies = 4;  // overflow enum values, m_format_default included

enum class codec_kind : std::uint8_t { m_none, m_minifloat, m_e8m0, m_integer };

// m (< 2^53) divided by 2^s, rounded to nearest, ties to even (1 <= s <= 63).
constexpr std::uint64_t rne_shift(std::uint64_t m, int s) {
  const std::uint64_t half = std::uint64_t{1} << (s - 1);
  return (m + (half - 1) + ((m >> s) & 1u)) >> s;
}

struct bit_codec {
  codec_kind kind = codec_kind::m_none;
  int mb = 0, bias = 0, sign_shift = 0;
  std::uint64_t min_normal_exp = 0;  // the double's biased exponent of the target min normal
  std::uint64_t rebias = 0;          // (1023 - bias) << mb
  std::uint64_t max_mag = 0;         // magnitude code of the largest finite value
  bool fnuz = false;
  std::int64_t lowest = 0, highest = 0;  // integers
  std::uint32_t mask = 0;
  std::array<std::uint32_t, 2> nan_code{};                             // [negative]
  std::array<std::array<std::uint32_t, 2>, k_policies> over_code{};  // [policy][negative]
  std::array<double, 256> dec{};

  [[nodiscard]] std::uint32_t minifloat(double x, overflow o) const {
    const auto u = std::bit_cast<std::uint64_t>(x);
    const unsigned neg = static_cast<unsigned>(u >> 63);
    const std::uint64_t ua = u & ~k_sign;
    if (ua > k_exp_all) return nan_code[neg];
    if (ua == k_exp_all) return over_code[static_cast<std::size_t>(o)][neg];
    const std::uint64_t e = ua >> 52;
    std::uint64_t mag = 0;
    if (e >= min_normal_exp) {
      mag = rne_shift(ua, 52 - mb) - rebias;
      if (mag > max_mag) return over_code[static_cast<std::size_t>(o)][neg];
    } else if (e != 0) {  // double subnormals lie far below every target's half quantum
      // Bits to discard: the target quantum exponent (1 - bias - mb) minus the exponent of
      // the double significand's lsb (e - 1075); > 52 - mb here, and >= 64 leaves < half.
      const int s = 1076 - bias - mb - static_cast<int>(e);
      if (s < 64) mag = rne_shift((ua & k_frac) | (k_frac + 1), s);
    }
    if (mag == 0 && fnuz) return 0u;  // fnuz has no -0
    return (neg << sign_shift) | static_cast<std::uint32_t>(mag);
  }

  [[nodiscard]] std::uint32_t e8m0(double x, overflow o) const {
    if (!(x > 0.0)) return 0xFFu;  // NaN, zeros and negatives: unsigned, no zero
    const auto u = std::bit_cast<std::uint64_t>(x);
    if (u == k_exp_all) return over_code[static_cast<std::size_t>(o)][0];
    const auto e = static_cast<std::int64_t>(u >> 52);
    if (e < 1023 - 127) return 0u;  // below 2^-127: the smallest value, 2^-127
    // mb = 0: a fraction >= 1/2 rounds up (the tie too: the significand 1 is odd).
    const std::int64_t r = e - 1023 + static_cast<std::int64_t>((u >> 51) & 1u);
    if (r > 127) return over_code[static_cast<std::size_t>(o)][0];
    return static_cast<std::uint32_t>(r + 127);
  }

  [[nodiscard]] std::uint32_t integer(double x) const {
    if (std::isnan(x)) return nan_code[0];
    const auto u = std::bit_cast<std::uint64_t>(x);
    const std::uint64_t ua = u & ~k_sign;
    std::int64_t q = 0;
    if (ua >= std::bit_cast<std::uint64_t>(1024.0)) {
      q = 1024;  // beyond every integer format's range (inf too): the clamp decides
    } else if (const auto e = static_cast<int>(ua >> 52); e != 0) {
      const int s = 1075 - e;  // >= 43 below 1024
      if (s < 64) q = static_cast<std::int64_t>(rne_shift((ua & k_frac) | (k_frac + 1), s));
    }
    if (u & k_sign) q = -q;
    q = q < lowest ? lowest : (q > highest ? highest : q);
    return static_cast<std::uint32_t>(q) & mask;
  }
};

bit_codec build(format_id id) {
  const auto& f = info(id);
  bit_codec c;
  if (f.storage_bits > 8 || id == format_id::m_f64) return c;
  c.mask = (1u << f.storage_bits) - 1u;
  for (std::uint32_t code = 0; code <= c.mask; ++code) c.dec[code] = reference_decode(id, code);
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const auto ref = [&](double x, overflow o) {
    return reference_encode(id, x, rounding::m_nearest_even, o, 0);
  };
  c.nan_code = {ref(nan, overflow::m_saturate), ref(-nan, overflow::m_saturate)};
  for (std::size_t p = 0; p < k_policies; ++p) {
    const auto o = static_cast<overflow>(p);
    c.over_code[p] = {ref(inf, o), ref(-inf, o)};
  }
  if (!f.is_float) {
    c.kind = codec_kind::m_integer;
    c.lowest = static_cast<std::int64_t>(f.lowest);
    c.highest = static_cast<std::int64_t>(f.max_finite);
    return c;
  }
  if (id == format_id::m_e8m0) {
    c.kind = codec_kind::m_e8m0;
    return c;
  }
  c.kind = codec_kind::m_minifloat;
  c.mb = f.mantissa_bits;
  c.bias = f.bias;
  c.sign_shift = f.exponent_bits + f.mantissa_bits;
  c.min_normal_exp = static_cast<std::uint64_t>(1023 + 1 - f.bias);
  c.rebias = static_cast<std::uint64_t>(1023 - f.bias) << f.mantissa_bits;
  c.max_mag = ref(f.max_finite, overflow::m_saturate) & ~(1u << c.sign_shift);
  c.fnuz = f.nan == nan_style::m_fnuz;
  return c;
}

const std::array<bit_codec, 16>& codecs() {
  static const std::array<bit_codec, 16> table = [] {
    std::array<bit_codec, 16> t;
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = build(static_cast<format_id>(i));
    return t;
  }();
  return table;
}

}  // namespace

bool has_rne_bit_codec(format_id id) {
  const auto i = static_cast<std::size_t>(id);
  return i < codecs().size() && codecs()[i].kind != codec_kind::m_none;
}

std::uint32_t rne_bit_encode(format_id id, double x, overflow o) {
  const auto& c = codecs()[static_cast<std::size_t>(id)];
  switch (c.kind) {
    case codec_kind::m_minifloat: return c.minifloat(x, o);
    case codec_kind::m_e8m0: return c.e8m0(x, o);
    default: return c.integer(x);
  }
}

bool try_rne_bit_encode(format_id id, double x, overflow o, std::uint32_t& out) {
  const auto i = static_cast<std::size_t>(id);
  const auto& t = codecs();
  if (i >= t.size()) return false;
  const auto& c = t[i];
  switch (c.kind) {
    case codec_kind::m_minifloat: out = c.minifloat(x, o); return true;
    case codec_kind::m_e8m0: out = c.e8m0(x, o); return true;
    case codec_kind::m_integer: out = c.integer(x); return true;
    default: return false;
  }
}

bool try_table_decode(format_id id, std::uint32_t code, double& out) {
  const auto i = static_cast<std::size_t>(id);
  const auto& t = codecs();
  if (i >= t.size() || t[i].kind == codec_kind::m_none) return false;
  out = t[i].dec[code & t[i].mask];
  return true;
}

double table_decode(format_id id, std::uint32_t code) {
  const auto& c = codecs()[static_cast<std::size_t>(id)];
  return c.dec[code & c.mask];
}

}  // namespace numprobe::formats::detail
