// The catalogue's vectors (mma_catalogue.hpp). Each vector's comment in mma_classify.cpp gives
// the output each hypothesis predicts.
#include "probes/mma/mma_catalogue.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <limits>
#include <initializer_list>
#include <optional>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::probes {
namespace {

using formats::format_id;

double p2(int e) { return std::ldexp(1.0, e); }

// (a, b), both normal values of the format, with a * b = s * 2^e (s = 1 or 1.5), the two
// exponents as close as the format allows.
std::optional<std::pair<double, double>> factor(format_id f, double s, int e) {
  const emu::mma_format_bits bits = emu::mma_bits(f);
  std::optional<std::pair<double, double>> best;
  int best_gap = std::numeric_limits<int>::max();
  for (int ea = bits.min_exponent; ea <= bits.max_exponent; ++ea) {
    const int eb = e - ea;
    if (eb < bits.min_exponent || eb > bits.max_exponent) continue;
    const double a = s * p2(ea);
    const double b = p2(eb);
    if (!emu::mma_representable(f, a) || !emu::mma_representable(f, b)) continue;
    if (std::abs(ea - eb) < best_gap) {
      best_gap = std::abs(ea - eb);
      best = std::make_pair(a, b);
    }
  }
  return best;
}

struct builder {
  const mma_path& path;
  std::vector<mma_vector> out;

  mma_vector blank(std::string property, int param, int sign = 1) const {
    mma_vector v;
    v.property = std::move(property);
    v.param = param;
    v.sign = sign;
    v.a.assign(path.k, 0.0);
    v.b.assign(path.k, 0.0);
    return v;
  }
  // Sets product i to sign * s * 2^e; false when the format cannot make it.
  bool put(mma_vector& v, int i, int sign, double s, int e) const {
    const auto ab = factor(path.input, s, e);
    if (!ab) return false;
    v.a[i] = sign * ab->first;
    v.b[i] = ab->second;
    return true;
  }
  void add(mma_vector v, std::string id) {
    v.id = std::move(id);
    out.push_back(std::move(v));
  }
};

}  // namespace

mma_path mma_model_path(const emu::mma_model& m) {
  using providers::mma_accumulator;
  mma_path p{m.name, m.input, m.k};
  if (m.integer())
    p.accumulator = m.integer_saturate ? mma_accumulator::m_s32_satfinite : mma_accumulator::m_s32;
  else if (m.output == format_id::m_f16)
    p.accumulator = mma_accumulator::m_f16;
  return p;
}

bool mma_accumulator_holds(const mma_path& path, double x) {
  if (path.integer()) return x == std::trunc(x) && x >= -0x1p31 && x <= 0x1p31 - 1;
  return emu::mma_representable(path.output(), x);
}

int mma_pair_exponent(const mma_path& path) {
  // 2^E with E as large as the format allows (two values of 2^(E/2)), capped at 40 so that
  // E - 48 stays a normal fp32 exponent; for an fp16 accumulator at 14, so that 2^E + 2^E and
  // C = 2^E are fp16 values.
  const int e = 2 * std::min(emu::mma_bits(path.input).max_exponent, 20);
  return path.output() == format_id::m_f16 ? std::min(e, 14) : e;
}

int mma_max_shift(const mma_path& path) {
  // The small term 2^(E-j) a product of two normal inputs, and a normal value of the output
  // (fp32's floor is far below; fp16's is 2^-14).
  const int e = mma_pair_exponent(path);
  return std::min({e - 2 * emu::mma_bits(path.input).min_exponent, 48, e - emu::mma_bits(path.output()).min_exponent});
}

namespace {

// The integer catalogue (i8 x i8 + s32): exact products and sums, then what the s32 does on
// overflow. Values: s32 extremes M = 2^31 - 1 and -2^31; p = 127 * 127 = 16129.
std::vector<mma_vector> integer_catalogue(const mma_path& path) {
  std::vector<mma_vector> out;
  const auto k = static_cast<std::size_t>(path.k);
  auto blank = [&](const char* property, int param) {
    mma_vector v;
    v.property = property;
    v.param = param;
    v.a.assign(k, 0.0);
    v.b.assign(k, 0.0);
    return v;
  };
  // products: every product (-128)^2 (the largest magnitude), and a mixed pattern of every
  // sign and size with C: both exact (no hypothesis but exactness: a miss is a finding).
  {
    mma_vector v = blank("products", 0);
    std::fill(v.a.begin(), v.a.end(), -128.0);
    std::fill(v.b.begin(), v.b.end(), -128.0);
    v.id = "products(all -128 * -128)";
    out.push_back(v);
    mma_vector w = blank("products", 1);
    for (std::size_t i = 0; i < k; ++i) {
      w.a[i] = static_cast<double>(static_cast<int>((i * 37 + 11) % 256) - 128);
      w.b[i] = static_cast<double>(static_cast<int>((i * 91 + 200) % 256) - 128);
    }
    w.c = -1234567.0;
    w.id = "products(mixed, c)";
    out.push_back(w);
  }
  // overflow: C near the s32 ends and products that cross them (p = 127 * 127 = 16129).
  const double top = 0x1p31 - 1, bottom = -0x1p31;
  auto overflow = [&](int param, const char* id, double c, std::initializer_list<std::pair<std::size_t, double>> ab) {
    mma_vector v = blank("overflow", param);
    v.c = c;
    for (const auto& [i, x] : ab) {
      v.a[i] = x;
      v.b[i] = x < 0 ? -x : x;  // a product of sign(x) * x^2
    }
    v.id = fmt::format("overflow({})", id);
    out.push_back(v);
  };
  overflow(0, "max+1", top, {{0, 1.0}});
  overflow(1, "min-1", bottom, {{0, -1.0}});
  overflow(2, "max-100 +p -p, one half", top - 100, {{0, 127.0}, {1, -127.0}});
  overflow(3, "max-100 +p, -p in the second half", top - 100, {{0, 127.0}, {k / 2, -127.0}});
  return out;
}

}  // namespace

std::vector<mma_vector> mma_catalogue(const mma_path& path) {
  if (path.integer()) return integer_catalogue(path);
  if (path.k < 8 || path.k % 4 != 0)
    throw_input_error("mma path " + path.name, fmt::format("k = {} (expected a multiple of 4, at least 8)", path.k));
  const emu::mma_format_bits in = emu::mma_bits(path.input);
  const int e = mma_pair_exponent(path);
  const int jmax = mma_max_shift(path);
  builder bld{path, {}};
  auto with_pair = [&](const std::string& property, int param, int sign = 1) {
    mma_vector v = bld.blank(property, param, sign);
    bld.put(v, 0, 1, 1.0, e);
    bld.put(v, 1, -1, 1.0, e);
    return v;
  };

  // products: (1 + 2^-p)^2 alone. An fp16 accumulator cannot hold its 2p bits, so there the
  // product is scaled by 2^6 and -(1 + 2^(1-p)) * 2^6 cancels its top: 2^(6-2p) is left if the
  // product was exact, 0 if it was rounded to p bits.
  {
    mma_vector v = bld.blank("products", in.fraction_bits);
    v.a[0] = v.b[0] = 1 + p2(-in.fraction_bits);
    if (path.output() == format_id::m_f16) {
      v.a[0] = v.b[0] = 8 * (1 + p2(-in.fraction_bits));
      v.a[1] = -8 * (1 + p2(1 - in.fraction_bits));
      v.b[1] = 8;
    }
    bld.add(v, fmt::format("products(p={})", in.fraction_bits));
  }
  // fraction_bits: the pair and 2^(E-j) at index 2.
  for (int j = 1; j <= jmax; ++j) {
    mma_vector v = with_pair("fraction_bits", j);
    if (bld.put(v, 2, 1, 1.0, e - j)) bld.add(v, fmt::format("fraction_bits(j={})", j));
  }
  // internal_rounding: the pair and +-0.75 of a unit 2^(E-f), one vector per candidate f.
  for (int f = 2; f < jmax - 1; ++f)
    for (int sign : {1, -1}) {
      mma_vector v = with_pair("internal_rounding", f, sign);
      if (bld.put(v, 2, sign, 1.5, e - f - 1))
        bld.add(v, fmt::format("internal_rounding(F={},sign={})", f, sign > 0 ? '+' : '-'));
    }
  // output_rounding: 2^E + 2^E + 1.5 * 2^(E-P') (0.75 of an ulp of P' bits at 2^(E+1)).
  // Both signs: toward zero and down differ only on negative sums.
  for (int pp = 4; pp <= std::min(jmax - 2, 40); ++pp)
    for (int sign : {1, -1}) {
      mma_vector v = bld.blank("output_rounding", pp, sign);
      bld.put(v, 0, sign, 1.0, e);
      bld.put(v, 1, sign, 1.0, e);
      if (bld.put(v, 2, sign, 1.5, e - pp))
        bld.add(v, fmt::format("output_rounding(P={},sign={})", pp, sign > 0 ? '+' : '-'));
    }
  // grouping: the pair and 2^(E-jmax) at index m.
  for (int m = 2; m < path.k; m *= 2) {
    mma_vector v = with_pair("grouping", m);
    if (bld.put(v, m, 1, 1.0, e - jmax)) bld.add(v, fmt::format("grouping(m={})", m));
  }
  // c_handling: c = 2^E and every product 2^(E-f-1) (half a unit of the group with C). An fp16
  // output cannot show k half units at 2^E (they are far below its 10 bits), so there the pair
  // cancels and c = 2^(E-f-2), a quarter unit: dropped in the group, kept when added after.
  for (int f = 2; f < jmax - 1; ++f) {
    if (path.output() == format_id::m_f16) {
      mma_vector v = with_pair("c_handling", f);
      v.c = p2(e - f - 2);
      bld.add(v, fmt::format("c_handling(F={})", f));
      continue;
    }
    mma_vector v = bld.blank("c_handling", f);
    v.c = p2(e);
    bool ok = true;
    for (int i = 0; i < path.k; ++i) ok = ok && bld.put(v, i, 1, 1.0, e - f - 1);
    if (ok) bld.add(v, fmt::format("c_handling(F={})", f));
  }
  // subnormals: the smallest subnormal input times 2^min(emax, 20); a subnormal fp32 C; and,
  // where the format reaches it, a product below fp32's normal range.
  {
    mma_vector v = bld.blank("subnormals", 0);
    v.a[0] = p2(in.min_exponent - in.fraction_bits);
    v.b[0] = p2(std::min(in.max_exponent, 20));
    bld.add(v, "subnormals(input)");
    // fp32: C = 2^-130 and a product 2^-140; fp16: 2^-18 and 2^-23.
    const emu::mma_format_bits out = emu::mma_bits(path.output());
    mma_vector c = bld.blank("subnormals", 1);
    c.c = p2(out.min_exponent - 4);
    bld.add(c, "subnormals(c)");
    mma_vector p = bld.blank("subnormals", 2);
    if (bld.put(p, 0, 1, 1.0, out.min_exponent - std::min(14, out.fraction_bits - 1))) bld.add(p, "subnormals(product)");
  }
  // nonfinite: IEEE cases (Inf only where the input format has one).
  {
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto one = [&](int param, const char* id, double a0, double b0, double a1, double b1, double c) {
      mma_vector v = bld.blank("nonfinite", param);
      v.a[0] = a0;
      v.b[0] = b0;
      v.a[1] = a1;
      v.b[1] = b1;
      v.c = c;
      bld.add(v, fmt::format("nonfinite({})", id));
    };
    one(0, "nan_input", nan, 1, 0, 0, 0);
    one(1, "c_inf", 1, 1, 0, 0, inf);
    one(2, "c_nan", 1, 1, 0, 0, nan);
    if (in.has_inf) {
      one(3, "inf_input", inf, 1, 0, 0, 0);
      one(4, "inf_times_zero", inf, 0, 0, 0, 0);
      one(5, "inf_minus_inf", inf, 1, -inf, 1, 0);
    }
    // Overflow past the accumulator's max (2^e + 2^e, e its largest exponent): only where the
    // products reach it (bf16, tf32 for fp32; every input for fp16).
    const int top = emu::mma_bits(path.output()).max_exponent;
    mma_vector v = bld.blank("nonfinite", 6);
    if (bld.put(v, 0, 1, 1.0, top) && bld.put(v, 1, 1, 1.0, top)) bld.add(v, "nonfinite(overflow)");
  }
  return bld.out;
}

std::vector<mma_path> mma_device_paths() {
  using providers::mma_accumulator;
  using providers::mma_family;
  return {
      {"mma.sync.m16n8k16.f32.f16", format_id::m_f16, 16},
      {"mma.sync.m16n8k16.f32.bf16", format_id::m_bf16, 16},
      {"mma.sync.m16n8k8.f32.tf32", format_id::m_tf32, 8},
      {"mma.sync.m16n8k32.f32.e4m3", format_id::m_e4m3fn, 32},
      {"mma.sync.m16n8k32.f32.e5m2", format_id::m_e5m2, 32},
      {"wgmma.m64n8k16.f32.f16", format_id::m_f16, 16, providers::mma_family::m_wgmma},
      {"wgmma.m64n8k16.f32.bf16", format_id::m_bf16, 16, providers::mma_family::m_wgmma},
      {"wgmma.m64n8k8.f32.tf32", format_id::m_tf32, 8, providers::mma_family::m_wgmma},
      {"wgmma.m64n8k32.f32.e4m3", format_id::m_e4m3fn, 32, providers::mma_family::m_wgmma},
      {"wgmma.m64n8k32.f32.e5m2", format_id::m_e5m2, 32, providers::mma_family::m_wgmma},
      {"mma.sync.m16n8k16.f16.f16", format_id::m_f16, 16, mma_family::m_mma_sync, mma_accumulator::m_f16},
      {"mma.sync.m16n8k32.f16.e4m3", format_id::m_e4m3fn, 32, mma_family::m_mma_sync, mma_accumulator::m_f16},
      {"mma.sync.m16n8k32.f16.e5m2", format_id::m_e5m2, 32, mma_family::m_mma_sync, mma_accumulator::m_f16},
      {"wgmma.m64n8k16.f16.f16", format_id::m_f16, 16, mma_family::m_wgmma, mma_accumulator::m_f16},
      {"wgmma.m64n8k32.f16.e4m3", format_id::m_e4m3fn, 32, mma_family::m_wgmma, mma_accumulator::m_f16},
      {"wgmma.m64n8k32.f16.e5m2", format_id::m_e5m2, 32, mma_family::m_wgmma, mma_accumulator::m_f16},
      {"mma.sync.m16n8k32.s32.s8", format_id::m_i8, 32, mma_family::m_mma_sync, mma_accumulator::m_s32},
      {"mma.sync.m16n8k32.satfinite.s32.s8", format_id::m_i8, 32, mma_family::m_mma_sync,
       mma_accumulator::m_s32_satfinite},
      {"wgmma.m64n8k32.s32.s8", format_id::m_i8, 32, mma_family::m_wgmma, mma_accumulator::m_s32},
      {"wgmma.m64n8k32.satfinite.s32.s8", format_id::m_i8, 32, mma_family::m_wgmma, mma_accumulator::m_s32_satfinite},
      {"wgmma.rs.m64n8k16.f32.f16", format_id::m_f16, 16, mma_family::m_wgmma_rs},
      {"wgmma.rs.m64n8k16.f32.bf16", format_id::m_bf16, 16, mma_family::m_wgmma_rs},
      {"wgmma.rs.m64n8k8.f32.tf32", format_id::m_tf32, 8, mma_family::m_wgmma_rs},
      {"wgmma.rs.m64n8k32.f32.e4m3", format_id::m_e4m3fn, 32, mma_family::m_wgmma_rs},
      {"wgmma.rs.m64n8k32.f32.e5m2", format_id::m_e5m2, 32, mma_family::m_wgmma_rs},
  };
}

}  // namespace numprobe::probes
