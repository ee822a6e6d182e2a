#pragma once
// Shared helpers of the emulated-kernel tests: running the emulator and the reference on the
// same rounded inputs, and the error measures the tests bound.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/row_sampling.hpp"
#include "numprobe/reference/attention.hpp"
#include "src/kernels/emu/flash_attention.hpp"

namespace numprobe::emu::testing {

// gtest parameter names allow only [A-Za-z0-9_].
inline std::string sanitize(const std::string& id) {
  std::string out;
  for (char ch : id) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    if (ok) out += ch;
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// Every row, or a stratified sample (DESIGN.md) for long cases so the tests stay fast.
inline std::vector<std::int64_t> test_rows(const attention_case& c, std::int64_t tile_q,
                                           std::int64_t tile_k, std::int64_t max_rows = 48) {
  if (c.rows() <= 2 * max_rows) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
    std::iota(rows.begin(), rows.end(), std::int64_t{0});
    return rows;
  }
  row_sampling s;
  s.max_rows = max_rows;
  s.tile_q = tile_q;
  s.tile_k = tile_k;
  s.seed = c.seed;
  return sample_rows(c, s);
}

// Seeded per-row key ranges for mask=ranges, including empty and single-key ranges.
inline std::vector<key_range> seeded_ranges(std::int64_t t, std::int64_t s, std::uint64_t seed) {
  std::vector<key_range> out;
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (std::int64_t i = 0; i < t; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const auto a = static_cast<std::int64_t>(x % static_cast<std::uint64_t>(s + 1));
    const auto b = static_cast<std::int64_t>((x >> 32) % static_cast<std::uint64_t>(s + 1));
    if (i % 7 == 3) out.push_back({a, a});  // empty: a fully masked row
    else out.push_back({std::min(a, b), std::max(a, b) + (a == b && b < s ? 1 : 0)});
  }
  return out;
}

inline flash_config all_f64_config(std::int64_t tile_q, std::int64_t tile_k, bool use_exp2) {
  flash_config cfg;
  cfg.tile_q = tile_q;
  cfg.tile_k = tile_k;
  cfg.exp2 = use_exp2;
  for (std::string_view n : state_names()) set_state(cfg.states, n, formats::format_id::m_f64);
  return cfg;
}

inline attention_output reference_on(const attention_inputs& in, const std::vector<std::int64_t>& rows) {
  const std::vector<double> q = in.q_rows(rows);
  return reference::attention(in.c(), q, rows, in.k(), in.v());
}

inline attention_output naive_on(const attention_inputs& in, const std::vector<std::int64_t>& rows) {
  const std::vector<double> q = in.q_rows(rows);
  return reference::attention_naive(in.c(), q, rows, in.k(), in.v());
}

inline std::size_t count_nan(const attention_output& out) {
  std::size_t n = 0;
  for (double x : out.o) n += std::isnan(x) ? 1 : 0;
  for (double x : out.lse) n += std::isnan(x) ? 1 : 0;
  return n;
}

// Global relative RMS error of O: sqrt(sum (o - r)^2 / sum r^2). NaN propagates, so a NaN
// candidate can never pass a "<=" bound.
inline double rel_rms(const attention_output& got, const attention_output& ref) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < ref.o.size(); ++i) {
    const double e = got.o[i] - ref.o[i];
    num += e * e;
    den += ref.o[i] * ref.o[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace numprobe::emu::testing
