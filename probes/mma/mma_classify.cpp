// The classifier (mma_classify.hpp): one function per property, in the order the later ones
// need the earlier (fraction bits before rounding, output precision before C handling).
#include "probes/mma/mma_classify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <limits>

#include "numprobe/base/error.hpp"

namespace numprobe::probes {
namespace {

using emu::mma_rounding;


constexpr mma_rounding k_modes[] = {mma_rounding::m_toward_zero, mma_rounding::m_down,
                                    mma_rounding::m_nearest_even};

bool same(double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; }

// The property's vectors (those of `name` accepted by `keep`) and their measured outputs.
mma_property select(const std::string& name, const std::string& question, const std::vector<mma_vector>& vectors,
                    const std::vector<double>& measured, const auto& keep) {
  mma_property p;
  p.name = name;
  p.question = question;
  for (std::size_t i = 0; i < vectors.size(); ++i)
    if (vectors[i].property == name && keep(vectors[i])) {
      p.vectors.push_back(vectors[i]);
      p.measured.push_back(measured[i]);
    }
  return p;
}

// Fills `matching`; determined when exactly one hypothesis matches.
void match(mma_property& p) {
  p.matching.clear();
  for (const auto& h : p.hypotheses) {
    bool all = true;
    for (std::size_t i = 0; i < p.measured.size(); ++i) all = all && same(h.predicted[i], p.measured[i]);
    if (all) p.matching.push_back(h.label);
  }
  p.determined = p.matching.size() == 1 && !p.vectors.empty();
  if (p.vectors.empty())
    p.verdict = "inconclusive: no vector of this property applies";
  else if (p.matching.empty())
    p.verdict = "no hypothesis matches the measured outputs";
  else if (p.determined)
    p.verdict = p.matching.front();
  else
    p.verdict = fmt::format("ambiguous: {} hypotheses match ({} .. {})", p.matching.size(), p.matching.front(),
                            p.matching.back());
}

double product(const mma_vector& v, int i) { return v.a[i] * v.b[i]; }  // exact: both factors short

}  // namespace

double mma_round_bits(double x, int bits, mma_rounding mode, int min_exponent) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  const int e = std::max(std::ilogb(x), min_exponent);
  const double scaled = std::ldexp(x, bits - e);  // exact: a power-of-two scaling
  double r = 0.0;
  switch (mode) {
    case mma_rounding::m_toward_zero: r = std::trunc(scaled); break;
    case mma_rounding::m_down: r = std::floor(scaled); break;
    case mma_rounding::m_nearest_even: r = std::nearbyint(scaled); break;  // default mode: ties to even
  }
  return std::ldexp(r, e - bits);
}

namespace {

// The integer catalogue (mma_catalogue.cpp, integer_catalogue): exact products, and the s32
// result on overflow under four hypotheses, each a closed form on the exact 64-bit sums.
mma_characterisation classify_integer(const mma_path& path, const std::vector<mma_vector>& vectors,
                                      const std::vector<double>& measured) {
  mma_characterisation out;
  out.path = path;
  mma_findings& f = out.findings;
  const auto all = [](const mma_vector&) { return true; };
  const auto k = static_cast<std::size_t>(path.k);
  auto exact = [&](const mma_vector& v, std::size_t from, std::size_t to) {
    std::int64_t s = 0;
    for (std::size_t i = from; i < to; ++i) s += static_cast<std::int64_t>(v.a[i]) * static_cast<std::int64_t>(v.b[i]);
    return s;
  };
  auto clamp = [](std::int64_t x) { return std::clamp<std::int64_t>(x, INT32_MIN, INT32_MAX); };
  {
    mma_property p = select("products", "are the products and their sum with C exact?", vectors, measured, all);
    mma_hypothesis h{"exact", {}};
    for (const auto& v : p.vectors) h.predicted.push_back(static_cast<double>(exact(v, 0, k) + static_cast<std::int64_t>(v.c)));
    p.hypotheses = {h};
    match(p);
    f.products_exact = p.determined;
    out.properties.push_back(std::move(p));
  }
  {
    mma_property p = select("overflow", "what does the s32 accumulator do past 2^31 - 1 or below -2^31?", vectors,
                            measured, all);
    mma_hypothesis wrap{k_wraps, {}}, once{k_clamped_once, {}},
        halves{"clamped after each half of K (C first)", {}}, each{"clamped after each product (C first, k order)", {}};
    for (const auto& v : p.vectors) {
      const auto c = static_cast<std::int64_t>(v.c);
      const std::int64_t total = c + exact(v, 0, k);
      wrap.predicted.push_back(static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(total))));
      once.predicted.push_back(static_cast<double>(clamp(total)));
      halves.predicted.push_back(static_cast<double>(clamp(clamp(c + exact(v, 0, k / 2)) + exact(v, k / 2, k))));
      std::int64_t r = c;
      for (std::size_t i = 0; i < k; ++i) r = clamp(r + exact(v, i, i + 1));
      each.predicted.push_back(static_cast<double>(r));
    }
    p.hypotheses = {wrap, once, halves, each};
    match(p);
    if (p.determined) f.integer_overflow = p.matching.front();
    out.properties.push_back(std::move(p));
  }
  return out;
}

}  // namespace

mma_characterisation mma_classify(const mma_path& path, const std::vector<mma_vector>& vectors,
                                  const std::vector<double>& measured) {
  if (vectors.size() != measured.size())
    throw_input_error("mma " + path.name,
                      fmt::format("{} outputs for {} vectors", measured.size(), vectors.size()));
  if (path.integer()) return classify_integer(path, vectors, measured);
  mma_characterisation out;
  out.path = path;
  mma_findings& f = out.findings;
  const emu::mma_format_bits acc = emu::mma_bits(path.output());
  const int e = mma_pair_exponent(path);
  const int jmax = mma_max_shift(path);
  const auto all = [](const mma_vector&) { return true; };

  // products: exact (1 + 2^-p)^2 = 1 + 2^(1-p) + 2^(-2p), or rounded to the input's p bits
  // (2^-2p is below half an ulp 2^-(p+1)): 1 + 2^(1-p). Assumes the sum and output keep 2p bits
  // (with an fp16 accumulator the top is cancelled first: mma_catalogue.cpp).
  {
    mma_property p = select("products", "are the products exact?", vectors, measured, all);
    mma_hypothesis exact{"exact", {}}, rounded{"rounded to the input precision", {}};
    for (const auto& v : p.vectors) {
      double e_sum = 0.0, r_sum = 0.0;  // exact in double: at most two short products
      for (int i = 0; i < path.k; ++i) {
        e_sum += product(v, i);
        r_sum += mma_round_bits(product(v, i), v.param, mma_rounding::m_nearest_even);
      }
      exact.predicted.push_back(e_sum);
      rounded.predicted.push_back(r_sum);
    }
    if (!p.vectors.empty()) p.hypotheses = {exact, rounded};
    match(p);
    if (p.determined) f.products_exact = p.matching.front() == "exact";
    out.properties.push_back(std::move(p));
  }

  // fraction_bits: +2^E - 2^E + 2^(E-j): the pair fixes e_max = E; F kept bits keep 2^(E-j)
  // for j <= F (exactly, whatever the output rounding) and drop it for j > F (at j = F+1 it is
  // half a unit: truncation and ties-to-even both give 0).
  {
    mma_property p = select("fraction_bits", "how many bits below the group's largest exponent does the sum keep?",
                            vectors, measured, all);
    for (int hf = 0; hf <= jmax; ++hf) {
      mma_hypothesis h{hf == jmax ? fmt::format("F>={}", jmax) : fmt::format("F={}", hf), {}};
      for (const auto& v : p.vectors) h.predicted.push_back(v.param <= hf ? product(v, 2) : 0.0);
      p.hypotheses.push_back(std::move(h));
    }
    match(p);
    if (p.determined) {
      const std::string& l = p.matching.front();
      if (l.rfind("F>=", 0) == 0) {
        f.fraction_bits_at_least = jmax;
        p.verdict = fmt::format("F>={} (every term of the sweep kept; or groups of 2 or fewer)", jmax);
        p.determined = false;
      } else {
        f.fraction_bits = std::stoi(l.substr(2));
      }
    }
    out.properties.push_back(std::move(p));
  }
  const int F = f.fraction_bits.value_or(-1);

  // internal_rounding: +2^E - 2^E +- 0.75 u (u = 2^(E-F)): toward zero (0, 0), down (0, -u),
  // nearest even (u, -u).
  {
    mma_property p = select("internal_rounding", "how are terms rounded when aligned to the group?", vectors,
                            measured, [&](const mma_vector& v) { return v.param == F; });
    const double u = std::ldexp(1.0, e - F);
    for (mma_rounding m : k_modes) {
      mma_hypothesis h{std::string(emu::mma_rounding_name(m)), {}};
      for (const auto& v : p.vectors) {
        const double t = v.sign > 0 ? (m == mma_rounding::m_nearest_even ? u : 0.0)
                                    : (m == mma_rounding::m_toward_zero ? 0.0 : -u);
        h.predicted.push_back(t);
      }
      p.hypotheses.push_back(std::move(h));
    }
    match(p);
    if (F < 0) p.verdict = "inconclusive: needs the fraction bits";
    if (p.determined && F >= 0)
      for (mma_rounding m : k_modes)
        if (p.matching.front() == emu::mma_rounding_name(m)) f.internal_rounding = m;
    out.properties.push_back(std::move(p));
  }

  // output_rounding: 2^E + 2^E + 1.5 * 2^(E-P') is kept exactly when P' <= F-1, and the
  // output of P bits rounds it: predicted = round(S, P, mode) for every (P, mode).
  {
    mma_property p = select("output_rounding", "how many bits does the output keep, and how does it round?",
                            vectors, measured, [&](const mma_vector& v) { return F >= 0 && v.param <= F - 1; });
    for (int bits = 4; bits <= 40; ++bits)
      for (mma_rounding m : k_modes) {
        mma_hypothesis h{fmt::format("P={} {}", bits, emu::mma_rounding_name(m)), {}};
        for (const auto& v : p.vectors)
          h.predicted.push_back(mma_round_bits(product(v, 0) + product(v, 1) + product(v, 2), bits, m, acc.min_exponent));
        p.hypotheses.push_back(std::move(h));
      }
    match(p);
    if (p.determined) {
      int bits = 0;
      char mode[32] = {};
      if (std::sscanf(p.matching.front().c_str(), "P=%d %31s", &bits, mode) == 2) {
        f.output_fraction_bits = bits;
        for (mma_rounding m : k_modes)
          if (emu::mma_rounding_name(m) == mode) f.output_rounding = m;
      }
    } else if (p.matching.size() > 1) {
      p.verdict += " (the output keeps at least as many bits as the internal sum: its rounding is not observable)";
    }
    if (F < 0) p.verdict = "inconclusive: needs the fraction bits";
    out.properties.push_back(std::move(p));
  }

  // grouping: +2^E - 2^E at 0, 1 and 2^(E-jmax) at index m: in the pair's group it is dropped
  // (jmax > F + 1), in a later group it is the only term and kept. Groups of g: kept iff m >= g.
  {
    mma_property p = select("grouping", "how many products does one internal sum fuse (k-group)?", vectors,
                            measured, [&](const mma_vector&) { return F >= 0 && F < jmax - 1; });
    for (int g = 2; g <= path.k; g *= 2) {
      mma_hypothesis h{g == 2 ? std::string("k_group<=2") : fmt::format("k_group={}", g), {}};
      for (const auto& v : p.vectors) h.predicted.push_back(v.param >= g ? product(v, v.param) : 0.0);
      p.hypotheses.push_back(std::move(h));
    }
    match(p);
    if (p.determined) {
      const std::string& l = p.matching.front();
      f.k_group = l == "k_group<=2" ? 2 : std::stoi(l.substr(8));
    }
    if (F < 0 || F >= jmax - 1) p.verdict = "inconclusive: needs fraction bits below the sweep's end";
    out.properties.push_back(std::move(p));
  }

  // c_handling: terms designed so that, with C in the group, every term below the group's unit
  // 2^(e_max - F) is dropped (each is at most half a unit, a power of two: dropped by truncation,
  // by rounding down when positive, and by ties-to-even); added after, C joins the products'
  // exact sum at the output rounding. fp32 output: c = 2^E and k half units; fp16: the pair and
  // c a quarter unit (mma_catalogue.cpp).
  {
    const bool known = F >= 0 && f.output_fraction_bits && f.output_rounding;
    mma_property p = select("c_handling", "is C aligned with the products or added after them?", vectors,
                            measured, [&](const mma_vector& v) { return known && v.param == F; });
    if (known) {
      const int bits = *f.output_fraction_bits;
      const mma_rounding m = *f.output_rounding;
      mma_hypothesis in{"C in the first group", {}}, after{"C added after the products", {}};
      for (const auto& v : p.vectors) {
        // Exact in double: powers of two within 64 bits of each other.
        double sum = 0.0, kept = 0.0;
        int e_max = v.c != 0.0 ? std::ilogb(v.c) : std::numeric_limits<int>::min();
        for (int i = 0; i < path.k; ++i)
          if (product(v, i) != 0.0) e_max = std::max(e_max, std::ilogb(product(v, i)));
        const double unit = std::ldexp(1.0, e_max - F);
        for (int i = 0; i < path.k; ++i) {
          sum += product(v, i);
          if (std::fabs(product(v, i)) >= unit) kept += product(v, i);
        }
        if (std::fabs(v.c) >= unit) kept += v.c;
        in.predicted.push_back(mma_round_bits(kept, bits, m, acc.min_exponent));
        after.predicted.push_back(mma_round_bits(v.c + sum, bits, m, acc.min_exponent));
      }
      if (!p.vectors.empty() && same(in.predicted[0], after.predicted[0])) {
        p.hypotheses = {std::move(in), std::move(after)};
        match(p);
        p.determined = false;
        p.verdict = "inconclusive: both hypotheses predict the same output for this path";
      } else {
        p.hypotheses = {std::move(in), std::move(after)};
        match(p);
        if (p.determined) f.c_in_group = p.matching.front() == "C in the first group";
      }
    } else {
      match(p);
      p.verdict = "inconclusive: needs the fraction bits and the output rounding";
    }
    out.properties.push_back(std::move(p));
  }

  // subnormals: each vector alone predicts its exact value (kept) or 0 (flushed).
  {
    mma_property p = select("subnormals", "are subnormal inputs, C and results kept or flushed?", vectors,
                            measured, all);
    auto exact = [&](const mma_vector& v) { return v.c + product(v, 0); };
    mma_hypothesis kept{"kept", {}}, flush_in{"subnormal inputs flushed", {}},
        flush_out{"subnormal results flushed", {}}, flush_c{"subnormal C flushed on read", {}},
        both{"inputs and results flushed", {}};
    for (const auto& v : p.vectors) {
      const double x = exact(v);
      kept.predicted.push_back(x);
      // param 0: a subnormal input, normal product; 1: a subnormal C (read as an input and
      // written as the result); 2: normal inputs, subnormal product.
      flush_in.predicted.push_back(v.param == 2 ? x : 0.0);
      flush_out.predicted.push_back(v.param == 0 ? x : 0.0);
      flush_c.predicted.push_back(v.param == 1 ? 0.0 : x);
      both.predicted.push_back(0.0);
    }
    p.hypotheses = {kept, flush_in, flush_out, flush_c, both};
    match(p);
    if (p.determined) {
      const std::string& l = p.matching.front();
      f.flush_subnormal_inputs = l == "subnormal inputs flushed" || l == "inputs and results flushed";
      f.flush_subnormal_output = l == "subnormal results flushed" || l == "inputs and results flushed";
      if (l == "subnormal C flushed on read") f.flush_subnormal_inputs.reset();  // A/B kept, C not: no model field
    } else if (p.matching.size() == 2) {
      // Without a subnormal product (fp8, fp16) a flushed C is either reading.
      p.verdict += " (no product reaches the accumulator's subnormals in this format: a flushed C on read and a flushed"
                   " result look the same)";
    }
    out.properties.push_back(std::move(p));
  }

  // nonfinite: the IEEE results of the exact sums; overflow past the accumulator's max to Inf or
  // to its largest finite value.
  {
    mma_property p = select("nonfinite", "NaN and Inf: IEEE propagation? overflow to Inf?", vectors, measured, all);
    const double inf = std::numeric_limits<double>::infinity();
    mma_hypothesis ieee{"IEEE, overflow to Inf", {}}, sat{"IEEE, overflow to max finite", {}};
    for (const auto& v : p.vectors) {
      double s = v.c;
      for (int i = 0; i < path.k; ++i) s += v.a[i] * v.b[i];
      const double x = std::isnan(s) ? std::numeric_limits<double>::quiet_NaN() : s;
      const bool overflow = std::isfinite(x) && std::fabs(x) > acc.max_finite;
      ieee.predicted.push_back(overflow ? std::copysign(inf, x) : x);
      sat.predicted.push_back(overflow ? std::copysign(acc.max_finite, x) : x);
    }
    const bool overflow_tested =
        std::any_of(p.vectors.begin(), p.vectors.end(), [](const mma_vector& v) { return v.param == 6; });
    if (overflow_tested) {
      p.hypotheses = {ieee, sat};
    } else {
      ieee.label = "IEEE (no product reaches the accumulator's overflow in this format)";
      p.hypotheses = {ieee};
    }
    match(p);
    f.ieee_nonfinite = !p.matching.empty();
    if (p.determined && overflow_tested) f.overflow_to_inf = p.matching.front() == "IEEE, overflow to Inf";
    out.properties.push_back(std::move(p));
  }
  return out;
}

}  // namespace numprobe::probes
