// Measured models and their agreement with the device (mma_agreement.hpp).
#include "probes/mma/mma_agreement.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/rng.hpp"

namespace numprobe::probes {
namespace {

using formats::format_id;

bool same_bits(double x, double y, bool integer) {
  if (integer) return x == y;  // s32 values: exact in double
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return std::bit_cast<std::uint32_t>(static_cast<float>(x)) == std::bit_cast<std::uint32_t>(static_cast<float>(y));
}

// A stream of random draws for one vector.
struct draws {
  std::uint64_t seed, stream, n = 0;
  std::uint64_t next() { return counter_hash(seed, stream, n++); }
  int between(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }
  bool coin(int one_in) { return next() % static_cast<std::uint64_t>(one_in) == 0; }
};

// A normal value of the format with exponent e (clamped to the format) and a random fraction.
double normal_value(format_id f, int e, draws& d) {
  const emu::mma_format_bits b = emu::mma_bits(f);
  e = std::clamp(e, b.min_exponent, b.max_exponent);
  for (;;) {
    const auto m = static_cast<double>(d.next() % (std::uint64_t{1} << b.fraction_bits));
    const double v = std::ldexp(1.0 + m / std::ldexp(1.0, b.fraction_bits), e) * (d.coin(2) ? -1.0 : 1.0);
    if (std::fabs(v) <= b.max_finite) return v;  // e4m3's 1.875 * 2^8 is its NaN: draw again
  }
}

double subnormal_value(format_id f, draws& d) {
  const emu::mma_format_bits b = emu::mma_bits(f);
  const auto m = static_cast<double>(1 + d.next() % ((std::uint64_t{1} << b.fraction_bits) - 1));
  return std::ldexp(m, b.min_exponent - b.fraction_bits) * (d.coin(2) ? -1.0 : 1.0);
}

double fp32_value(int e, draws& d) {
  const auto m = static_cast<double>(d.next() % (std::uint64_t{1} << 23));
  return std::ldexp(1.0 + m / 0x1p23, e) * (d.coin(2) ? -1.0 : 1.0);
}

}  // namespace

namespace {

// The name, instruction, source, input and K every measured model of the path carries.
emu::mma_model measured_base(const mma_path& path) {
  emu::mma_model m;
  m.name = "measured";
  m.instruction = path.name;
  m.source = "numprobe mma (this device)";
  m.input = path.input;
  m.k = path.k;
  return m;
}

}  // namespace

std::optional<emu::mma_model> model_from_findings(const mma_path& path, const mma_findings& f, std::string& why) {
  if (path.integer()) {
    // Exact products, and an s32 that wraps or is clamped once: the two behaviours a model has.
    if (!f.products_exact.value_or(false)) {
      why = "not determined: the integer products or sums are not exact";
      return std::nullopt;
    }
    if (!f.integer_overflow || (*f.integer_overflow != k_wraps && *f.integer_overflow != k_clamped_once)) {
      why = f.integer_overflow ? "overflow " + *f.integer_overflow + ": no model clamps along the way"
                               : std::string("not determined: overflow");
      return std::nullopt;
    }
    emu::mma_model m = measured_base(path);
    m.k_group = path.k;
    m.integer_saturate = *f.integer_overflow == k_clamped_once;
    return m;
  }
  std::vector<std::string> missing;
  if (!f.products_exact) missing.push_back("product exactness");
  if (!f.fraction_bits) missing.push_back(f.fraction_bits_at_least >= 0
                                              ? fmt::format("fraction bits (at least {})", f.fraction_bits_at_least)
                                              : std::string("fraction bits"));
  if (!f.internal_rounding) missing.push_back("alignment rounding");
  if (!f.output_fraction_bits || !f.output_rounding) missing.push_back("output precision and rounding");
  if (!f.k_group || *f.k_group <= 2) missing.push_back("k-group");
  if (!f.c_in_group) missing.push_back("C handling");
  if (!missing.empty()) {
    why = "not determined: ";
    for (std::size_t i = 0; i < missing.size(); ++i) why += (i ? ", " : "") + missing[i];
    return std::nullopt;
  }
  emu::mma_model m = measured_base(path);
  m.k_group = *f.k_group;
  m.internal_fraction_bits = *f.fraction_bits;
  m.internal_rounding = *f.internal_rounding;
  m.c_in_group = *f.c_in_group;
  m.output = path.output();
  m.output_fraction_bits = *f.output_fraction_bits;
  m.output_rounding = *f.output_rounding;
  m.products_exact = *f.products_exact;
  m.flush_subnormal_inputs = f.flush_subnormal_inputs.value_or(false);
  m.flush_subnormal_output = f.flush_subnormal_output.value_or(false);
  return m;
}

namespace {

// Vector i of a four-family stream: family name, id, and zero operands of length k.
mma_vector family_vector(const char* const (&families)[4], int i, std::size_t k) {
  mma_vector v;
  v.property = families[i % 4];
  v.param = i;
  v.id = fmt::format("{}({})", v.property, i);
  v.a.assign(k, 0.0);
  v.b.assign(k, 0.0);
  return v;
}

// Integer paths: four families of s8 vectors and s32 C (docs/hardware.md):
//   random   every a, b in [-128, 127], C random in [-2^20, 2^20];
//   extreme  a, b from {-128, -127, 127} and C within 2^21 of an s32 end: overflow both ways;
//   cancel   pairs x*y and -x*y with C near an end: sums that cross an end and come back;
//   small    a, b in [-3, 3], C small: sums of every sign near zero.
std::vector<mma_vector> integer_random_vectors(const mma_path& path, int count, std::uint64_t seed) {
  static const char* const k_families[] = {"random", "extreme", "cancel", "small"};
  std::vector<mma_vector> out;
  const auto k = static_cast<std::size_t>(path.k);
  for (int i = 0; i < count; ++i) {
    draws d{seed, static_cast<std::uint64_t>(i)};
    mma_vector v = family_vector(k_families, i, k);
    const double end = d.coin(2) ? 0x1p31 - 1 : -0x1p31;
    const double near_end = end - std::copysign(static_cast<double>(d.between(0, 1 << 21)), end);
    if (v.property == "random") {
      for (std::size_t j = 0; j < k; ++j) {
        v.a[j] = d.between(-128, 127);
        v.b[j] = d.between(-128, 127);
      }
      v.c = d.between(-(1 << 20), 1 << 20);
    } else if (v.property == "extreme") {
      static const double k_ends[] = {-128.0, -127.0, 127.0};
      for (std::size_t j = 0; j < k; ++j) {
        v.a[j] = k_ends[d.next() % 3];
        v.b[j] = k_ends[d.next() % 3];
      }
      v.c = near_end;
    } else if (v.property == "cancel") {
      for (std::size_t j = 0; j + 1 < k; j += 2) {
        const std::size_t p = d.next() % k, q = d.next() % k;
        if (p == q) continue;
        v.a[p] = d.between(-128, 127);
        v.b[p] = d.between(-127, 127);
        v.a[q] = v.a[p];
        v.b[q] = -v.b[p];
      }
      v.c = near_end;
    } else {
      for (std::size_t j = 0; j < k; ++j) {
        v.a[j] = d.between(-3, 3);
        v.b[j] = d.between(-3, 3);
      }
      v.c = d.between(-40, 40);
    }
    out.push_back(std::move(v));
  }
  return out;
}

// A normal fp16 value with exponent e (clamped) and a random fraction: C for fp16 accumulators.
double fp16_value(int e, draws& d) { return normal_value(format_id::m_f16, e, d); }

}  // namespace

std::vector<mma_vector> mma_random_vectors(const mma_path& path, int count, std::uint64_t seed) {
  if (path.integer()) return integer_random_vectors(path, count, seed);
  static const char* const k_families[] = {"random", "cancel", "spread", "subnormal"};
  const emu::mma_format_bits b = emu::mma_bits(path.input);
  // An fp16 accumulator: products kept below 2^8 in the random and cancel families (sums of 32
  // stay finite) and below 2^16 in spread (some overflow, as a kernel's would).
  const bool f16_acc = path.output() == format_id::m_f16;
  const int lo = std::max(b.min_exponent, f16_acc ? -14 : -40), hi = std::min(b.max_exponent, f16_acc ? 7 : 40);
  const int small_hi = f16_acc ? 3 : 8;
  auto acc_value = [&](int e, draws& d) { return f16_acc ? fp16_value(std::min(e, 12), d) : fp32_value(e, d); };
  std::vector<mma_vector> out;
  for (int i = 0; i < count; ++i) {
    draws d{seed, static_cast<std::uint64_t>(i)};
    const auto k = static_cast<std::size_t>(path.k);
    mma_vector v = family_vector(k_families, i, k);
    if (v.property == "random") {
      for (std::size_t j = 0; j < k; ++j) {
        v.a[j] = normal_value(path.input, d.between(std::max(lo, -8), std::min(hi, small_hi)), d);
        v.b[j] = normal_value(path.input, d.between(std::max(lo, -8), std::min(hi, small_hi)), d);
      }
      v.c = d.coin(4) ? 0.0 : acc_value(d.between(-10, 12), d);
    } else if (v.property == "cancel") {
      // Half the products cancel in pairs (x*y and -x*y at random places); the rest are small.
      for (std::size_t j = 0; j < k; ++j) {
        v.a[j] = normal_value(path.input, d.between(std::max(lo, -8), std::min(hi, -2)), d);
        v.b[j] = normal_value(path.input, d.between(std::max(lo, -8), std::min(hi, 0)), d);
      }
      for (std::size_t j = 0; j + 1 < k; j += 2) {
        const std::size_t p = d.next() % k, q = d.next() % k;
        if (p == q) continue;
        v.a[p] = normal_value(path.input, d.between(std::max(lo, 2), std::min(hi, small_hi + 1)), d);
        v.b[p] = normal_value(path.input, d.between(std::max(lo, 0), std::min(hi, small_hi)), d);
        v.a[q] = -v.a[p];
        v.b[q] = v.b[p];
      }
      v.c = d.coin(2) ? 0.0 : acc_value(d.between(-12, 4), d);
    } else if (v.property == "spread") {
      for (std::size_t j = 0; j < k; ++j) {
        v.a[j] = normal_value(path.input, d.between(lo, hi), d);
        v.b[j] = normal_value(path.input, d.between(lo, hi), d);
      }
      v.c = d.coin(3) ? 0.0 : acc_value(d.between(f16_acc ? -14 : -60, 60), d);
    } else {
      for (std::size_t j = 0; j < k; ++j) {
        // The normal values sit at the bottom of the format's range too (not at -40): a
        // subnormal product must be within the fused sum's bits of the largest one to show.
        v.a[j] = d.coin(3) ? subnormal_value(path.input, d)
                           : normal_value(path.input, d.between(b.min_exponent, b.min_exponent + 6), d);
        v.b[j] = d.coin(3) ? subnormal_value(path.input, d) : normal_value(path.input, d.between(0, std::min(hi, 8)), d);
      }
      // A subnormal of the accumulator: below 2^-126 for fp32, 2^-14 for fp16.
      v.c = d.coin(2) ? 0.0 : std::ldexp(static_cast<double>(1 + d.next() % 1000), f16_acc ? -24 : -140);
    }
    out.push_back(std::move(v));
  }
  return out;
}

mma_agreement compare_with_model(const mma_path& path, const std::vector<mma_vector>& vectors,
                                 const std::vector<double>& device, const emu::mma_model& model, std::string label) {
  mma_agreement a;
  a.path = path.name;
  a.model = std::move(label);
  a.model_text = describe_model(model);
  a.vectors = vectors.size();
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    const mma_vector& v = vectors[i];
    const double want = emu::mma_dot(model, v.a, v.b, v.c, "mma model " + model.name);
    const bool eq = same_bits(device[i], want, path.integer());
    a.equal += eq ? 1 : 0;
    auto it = std::find_if(a.families.begin(), a.families.end(), [&](const auto& f) { return f.first == v.property; });
    if (it == a.families.end()) {
      a.families.push_back({v.property, {0, 0}});
      it = a.families.end() - 1;
    }
    it->second.first += eq ? 1 : 0;
    it->second.second += 1;
    if (!eq && a.first.size() < 5) a.first.push_back({v, device[i], want});
  }
  return a;
}

std::string describe_model(const emu::mma_model& m) {
  if (m.integer())
    return fmt::format("k={}, exact products and sum, s32 {}", m.k, m.integer_saturate ? k_clamped_once : k_wraps);
  return fmt::format("k={} in groups of {}, F={} {}, C {}, output {} P={} {}, products {}{}{}", m.k, m.k_group,
                     m.internal_fraction_bits, emu::mma_rounding_name(m.internal_rounding),
                     m.c_in_group ? "in the first group" : "added after the group", formats::name(m.output),
                     m.output_fraction_bits,
                     emu::mma_rounding_name(m.output_rounding), m.products_exact ? "exact" : "rounded",
                     m.flush_subnormal_inputs ? ", subnormal inputs flushed" : "",
                     m.flush_subnormal_output ? ", subnormal results flushed" : "");
}

}  // namespace numprobe::probes
