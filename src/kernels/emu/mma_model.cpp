// The MMA model's arithmetic (mma_model.hpp): terms as integer significands times powers of
// two, aligned and rounded on integers, so nothing depends on double rounding.
#include "src/kernels/emu/mma_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <optional>

#include "numprobe/base/error.hpp"

namespace numprobe::emu {
namespace {

using i128 = __int128;
using formats::format_id;

// One term: value = m * 2^q; e is its alignment exponent (for a product, e_a + e_b).
struct term {
  i128 m = 0;
  int q = 0;
  int e = 0;
};

int bit_length(i128 v) {
  unsigned __int128 u = v < 0 ? static_cast<unsigned __int128>(-v) : static_cast<unsigned __int128>(v);
  int n = 0;
  while (u != 0) {
    u >>= 1;
    ++n;
  }
  return n;
}

// m / 2^r rounded to an integer under `mode` (r > 0).
i128 shift_round(i128 m, int r, mma_rounding mode) {
  const bool neg = m < 0;
  const unsigned __int128 mag = neg ? static_cast<unsigned __int128>(-m) : static_cast<unsigned __int128>(m);
  unsigned __int128 quo = 0;
  bool half = false, below_half_nonzero = false, exact = true;
  if (r >= 127) {
    exact = mag == 0;
    below_half_nonzero = mag != 0;  // |m| < 2^126 < half of 2^r
  } else {
    const unsigned __int128 one = 1;
    quo = mag >> r;
    const unsigned __int128 rem = mag & ((one << r) - 1);
    const unsigned __int128 halfway = one << (r - 1);
    exact = rem == 0;
    half = rem == halfway;
    below_half_nonzero = rem != 0 && rem < halfway;
    if (rem > halfway && mode == mma_rounding::m_nearest_even) quo += 1;
  }
  if (!exact) {
    switch (mode) {
      case mma_rounding::m_toward_zero:
        break;
      case mma_rounding::m_down:
        if (neg) quo += 1;  // magnitude up for negatives
        break;
      case mma_rounding::m_nearest_even:
        if (half && (quo & 1) != 0) quo += 1;
        (void)below_half_nonzero;
        break;
    }
  }
  const i128 q = static_cast<i128>(quo);
  return neg ? -q : q;
}

// Decomposes a finite nonzero value of format f into m * 2^q with e = max(floor(log2|x|), e_min).
term decompose(double x, const mma_format_bits& bits) {
  const int ex = std::ilogb(x);
  const int e = std::max(ex, bits.min_exponent);
  const int q = e - bits.fraction_bits;
  const double m = std::ldexp(x, -q);
  return term{static_cast<i128>(static_cast<std::int64_t>(m)), q, e};
}

bool is_subnormal(double x, const mma_format_bits& bits) {
  return x != 0.0 && std::isfinite(x) && std::ilogb(x) < bits.min_exponent;
}

// The value m * 2^q rounded to `fraction_bits` below its leading bit (exponents clamped at
// e_min: subnormals), under `mode`; flushes a subnormal result when asked; +-inf past max.
double round_out(i128 m, int q, int fraction_bits, const mma_format_bits& out, mma_rounding mode,
                 bool flush_subnormal) {
  if (m == 0) return 0.0;
  const int lead = q + bit_length(m) - 1;
  const int lsb = std::max(lead, out.min_exponent) - fraction_bits;
  double v = 0.0;
  if (lsb <= q) {
    v = std::ldexp(static_cast<double>(m), q);  // at most fraction_bits + 1 bits: exact
  } else {
    const i128 r = shift_round(m, lsb - q, mode);
    v = std::ldexp(static_cast<double>(r), lsb);
  }
  if (std::fabs(v) > out.max_finite) return std::copysign(std::numeric_limits<double>::infinity(), v);
  if (flush_subnormal && v != 0.0 && std::fabs(v) < std::ldexp(1.0, out.min_exponent)) return std::copysign(0.0, v);
  return v;
}

// One fused group: the terms aligned to 2^(e_max - fraction_bits), rounded, added exactly;
// returned as (sum, scale exponent) so that the value is sum * 2^scale.
std::pair<i128, int> fused_sum(const std::vector<term>& terms, int fraction_bits, mma_rounding mode) {
  std::optional<int> e_max;
  for (const auto& t : terms)
    if (t.m != 0) e_max = e_max ? std::max(*e_max, t.e) : t.e;
  if (!e_max) return {0, 0};
  const int scale = *e_max - fraction_bits;
  i128 sum = 0;
  for (const auto& t : terms) {
    if (t.m == 0) continue;
    const int shift = t.q - scale;
    sum += shift >= 0 ? t.m * (static_cast<i128>(1) << shift) : shift_round(t.m, -shift, mode);
  }
  return {sum, scale};
}

void check_value(format_id f, double x, const std::string& place, const char* what) {
  if (!mma_representable(f, x))
    throw_input_error(place, fmt::format("{} {:.17g} is not a value of {}", what, x,
                                         formats::name(f)));
}

}  // namespace

std::string_view mma_rounding_name(mma_rounding r) {
  switch (r) {
    case mma_rounding::m_toward_zero: return "toward-zero";
    case mma_rounding::m_down: return "down";
    case mma_rounding::m_nearest_even: return "nearest-even";
  }
  return "?";
}

mma_format_bits mma_bits(format_id f) {
  switch (f) {
    case format_id::m_f32: return {23, -126, 127, 0x1.fffffep127, true};
    case format_id::m_tf32: return {10, -126, 127, 0x1.ffcp127, true};
    case format_id::m_bf16: return {7, -126, 127, 0x1.fep127, true};
    case format_id::m_f16: return {10, -14, 15, 65504.0, true};
    case format_id::m_e4m3fn: return {3, -6, 8, 448.0, false};
    case format_id::m_e5m2: return {2, -14, 15, 57344.0, true};
    default: break;
  }
  throw_input_error("mma model", fmt::format("format {} is not an MMA input format", formats::name(f)));
}

bool mma_representable(format_id f, double x) {
  if (f == format_id::m_i8) return x == std::trunc(x) && x >= -128.0 && x <= 127.0;  // NaN fails both
  const mma_format_bits bits = mma_bits(f);
  if (std::isnan(x)) return true;  // every MMA input format has a NaN encoding
  if (std::isinf(x)) return bits.has_inf;
  if (x == 0.0) return true;
  if (std::fabs(x) > bits.max_finite) return false;
  const int e = std::max(std::ilogb(x), bits.min_exponent);
  const double m = std::ldexp(x, bits.fraction_bits - e);
  return m == std::trunc(m);  // a subnormal below the format's grid gives a non-integral m
}

bool mma_accumulator_value(const mma_model& model, double x) {
  if (model.integer()) return x == std::trunc(x) && x >= -0x1p31 && x <= 0x1p31 - 1;
  return mma_representable(model.output, x);
}

namespace {

// The integer path: exact products and sum (|sum| < 2^31 + k * 2^14), then wrapped to s32 or
// clamped (.satfinite).
double integer_dot(const mma_model& model, std::span<const double> a, std::span<const double> b, double c,
                   const std::string& place) {
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    check_value(model.input, a[i], place, "a");
    check_value(model.input, b[i], place, "b");
    sum += static_cast<std::int64_t>(a[i]) * static_cast<std::int64_t>(b[i]);
  }
  if (!mma_accumulator_value(model, c)) throw_input_error(place, fmt::format("c {:.17g} is not an s32 value", c));
  sum += static_cast<std::int64_t>(c);
  if (model.integer_saturate)
    return static_cast<double>(std::clamp<std::int64_t>(sum, INT32_MIN, INT32_MAX));
  return static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(sum)));  // modulo 2^32
}

}  // namespace

double mma_dot(const mma_model& model, std::span<const double> a, std::span<const double> b, double c,
               const std::string& place) {
  if (a.size() != b.size() || static_cast<int>(a.size()) != model.k)
    throw_input_error(place, fmt::format("{} expects k = {} products, got {} and {}", model.name, model.k,
                                         a.size(), b.size()));
  if (model.integer()) return integer_dot(model, a, b, c, place);
  if (model.k_group < 1 || model.k % model.k_group != 0)
    throw_input_error(place, fmt::format("{}: k_group {} does not divide k {}", model.name, model.k_group, model.k));
  if (!model.k_order.empty()) {
    // Products taken in the model's order (checked to be a permutation of 0..k-1).
    std::vector<bool> seen(a.size(), false);
    bool ok = model.k_order.size() == a.size();
    for (const int i : model.k_order) {
      ok = ok && i >= 0 && i < model.k && !seen[static_cast<std::size_t>(i)];
      if (ok) seen[static_cast<std::size_t>(i)] = true;
    }
    if (!ok) throw_input_error(place, fmt::format("{}: k_order is not a permutation of 0..{}", model.name, model.k - 1));
    std::vector<double> pa, pb;
    for (const int i : model.k_order) {
      pa.push_back(a[static_cast<std::size_t>(i)]);
      pb.push_back(b[static_cast<std::size_t>(i)]);
    }
    mma_model in_order = model;
    in_order.k_order.clear();
    return mma_dot(in_order, pa, pb, c, place);
  }
  const mma_format_bits in = mma_bits(model.input);
  const mma_format_bits out = mma_bits(model.output);
  bool nonfinite = !std::isfinite(c);
  for (std::size_t i = 0; i < a.size(); ++i) {
    check_value(model.input, a[i], place, "a");
    check_value(model.input, b[i], place, "b");
    nonfinite = nonfinite || !std::isfinite(a[i]) || !std::isfinite(b[i]);
  }
  check_value(model.output, c, place, "c");
  if (nonfinite) {
    // The IEEE result of the exact sum: +-Inf, or NaN (inf - inf, inf * 0, a NaN input).
    double s = c;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return std::isnan(s) ? std::numeric_limits<double>::quiet_NaN() : s;
  }

  auto read = [&](double x, const mma_format_bits& bits) -> double {
    return model.flush_subnormal_inputs && is_subnormal(x, bits) ? 0.0 : x;
  };
  auto product = [&](double x, double y) -> term {
    x = read(x, in);
    y = read(y, in);
    if (x == 0.0 || y == 0.0) return term{};
    const term tx = decompose(x, in);
    const term ty = decompose(y, in);
    term p{tx.m * ty.m, tx.q + ty.q, tx.e + ty.e};
    if (!model.products_exact) {
      // The hypothesis "products rounded to the input precision" (RNE): keep
      // in.fraction_bits below the product's own leading bit.
      const int lead = p.q + bit_length(p.m) - 1;
      const int lsb = lead - in.fraction_bits;
      if (lsb > p.q) {
        p.m = shift_round(p.m, lsb - p.q, mma_rounding::m_nearest_even);
        p.q = lsb;
      }
      p.e = p.q + bit_length(p.m) - 1;
    }
    return p;
  };
  auto c_term = [&](double x) -> term {
    x = read(x, out);
    return x == 0.0 ? term{} : decompose(x, out);
  };

  double running = model.c_added_last ? 0.0 : c;
  for (int g = 0; g < model.k; g += model.k_group) {
    std::vector<term> terms;
    for (int i = g; i < g + model.k_group; ++i) terms.push_back(product(a[i], b[i]));
    const bool c_here = model.c_in_group || g > 0;  // split-k: the running value enters each later group
    if (c_here) terms.push_back(c_term(running));
    auto [sum, scale] = fused_sum(terms, model.internal_fraction_bits, model.internal_rounding);
    if (!c_here) {
      // C added after the group: the group's sum rounded to the output, then one exactly
      // aligned two-term add (64 bits below the larger: exact unless the exponents differ
      // by more than 64).
      const double group = round_out(sum, scale, model.output_fraction_bits, out, model.output_rounding,
                                     model.flush_subnormal_output);
      if (!std::isfinite(group)) {
        running = group;  // overflow: Inf plus a finite C stays Inf
        break;
      }
      std::vector<term> two;
      if (group != 0.0) two.push_back(decompose(group, out));
      two.push_back(c_term(running));
      std::tie(sum, scale) = fused_sum(two, 64, model.output_rounding);
    }
    running = round_out(sum, scale, model.output_fraction_bits, out, model.output_rounding,
                        model.flush_subnormal_output);
    if (!std::isfinite(running)) break;  // a group overflowed: later finite products keep +-Inf
  }
  if (model.c_added_last && std::isfinite(running) && c != 0.0) {
    // One fp32 addition of C: exact two-term sum (64 bits below the larger), then rounded.
    std::vector<term> two;
    if (running != 0.0) two.push_back(decompose(running, out));
    two.push_back(c_term(c));
    auto [sum, scale] = fused_sum(two, 64, mma_rounding::m_toward_zero);
    running = round_out(sum, scale, model.output_fraction_bits, out, model.c_last_rounding, model.flush_subnormal_output);
  }
  return running;
}

std::vector<int> mma_pairs_interleaved_order(int k) {
  std::vector<int> order;
  for (int i = 0; i < k; ++i)
    if (i % 4 < 2) order.push_back(i);
  for (int i = 0; i < k; ++i)
    if (i % 4 >= 2) order.push_back(i);
  return order;
}

const mma_model& find_mma_model(std::string_view name, const std::string& place) {
  for (const auto& m : mma_models())
    if (m.name == name) return m;
  std::string names;
  for (const auto& m : mma_models()) names += (names.empty() ? "" : ", ") + m.name;
  throw_input_error(place, fmt::format("unknown MMA model '{}' (known: {})", name, names));
}

}  // namespace numprobe::emu
