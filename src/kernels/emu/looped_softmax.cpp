// The emulated looped softmax kernel (see looped_softmax.hpp).
#include "src/kernels/emu/looped_softmax.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <numbers>
#include <type_traits>

#include "numprobe/base/error.hpp"
#include "src/kernels/fault_table.hpp"
#include "src/kernels/emu/state_rounder.hpp"

namespace numprobe::emu {
namespace {

using formats::format_id;

constexpr std::array<std::string_view, 5> k_names{"x", "m", "l", "out", "lse"};

formats::format_id* slot(softmax_states& st, std::string_view name) {
  if (name == "x") return &st.x;
  if (name == "m") return &st.m;
  if (name == "l") return &st.l;
  if (name == "out") return &st.out;
  if (name == "lse") return &st.lse;
  return nullptr;
}

// A block reduction: a pairwise tree (warp shuffles, then across warps).
template <class A>
A tree_sum(const A* x, std::int64_t n) {
  if (n <= 8) {
    A s = A(0);
    for (std::int64_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  const std::int64_t half = n / 2;
  return tree_sum(x, half) + tree_sum(x + half, n - half);
}

template <class A>
softmax_result run(std::span<const double> logits, const softmax_params& prm,
                   const looped_softmax_config& cfg, const softmax_states& st) {
  const std::int64_t v = prm.vocab, chunk = cfg.chunk;
  const auto n_rows = static_cast<std::int64_t>(prm.targets.size());
  softmax_result out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.p.assign(logits.size(), nan);
  out.logp.assign(logits.size(), nan);
  out.lse.assign(static_cast<std::size_t>(n_rows), nan);
  out.ce.assign(static_cast<std::size_t>(n_rows), nan);
  const state_rounder<A> round_x(st.x), round_m(st.m), round_l(st.l), round_out(st.out),
      round_lse(st.lse);
  const bool guard = !cfg.has(fault::m_no_empty_guard);
  const A inf = std::numeric_limits<A>::infinity();
  const A m_init = cfg.has(fault::m_finite_sentinel) ? A(kernels::k_finite_sentinel) : -inf;
  const A cap = static_cast<A>(prm.softcap), temp = static_cast<A>(prm.temperature);
  const A log2e = static_cast<A>(static_cast<float>(std::numbers::log2e));
  auto exp_fn = [&](A x) { return cfg.exp2 ? std::exp2(x * log2e) : std::exp(x); };

#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const double* x = logits.data() + r * v;
    std::vector<A> z(static_cast<std::size_t>(v)), e(static_cast<std::size_t>(std::min(chunk, v)));
    for (std::int64_t i = 0; i < v; ++i) {
      if (std::isinf(x[i]) && x[i] < 0) {
        z[static_cast<std::size_t>(i)] = -inf;
        continue;
      }
      A zi = round_x(static_cast<A>(x[i]));
      if (prm.softcap > 0) zi = cap * std::tanh(zi / cap);
      z[static_cast<std::size_t>(i)] = zi / temp;
    }
    // Pass 1: online max and sum, chunk by chunk.
    A m = m_init, l = A(0);
    for (std::int64_t c0 = 0; c0 < v; c0 += chunk) {
      const std::int64_t n = std::min(chunk, v - c0);
      const A* zc = z.data() + c0;
      A cmax = -inf;
      for (std::int64_t i = 0; i < n; ++i) cmax = zc[i] > cmax ? zc[i] : cmax;
      const A m_new = round_m(std::max(m, cmax));
      // The empty guard: while no valid entry has been seen, m = -inf and exp is taken against
      // 0 instead, so exp(-inf - -inf) = NaN never reaches l.
      const A m_use = (guard && m_new == -inf) ? A(0) : m_new;
      const A alpha = exp_fn(m - m_use);
      for (std::int64_t i = 0; i < n; ++i) e[static_cast<std::size_t>(i)] = exp_fn(zc[i] - m_use);
      const A cs = tree_sum(e.data(), n);
      l = round_l(round_l(alpha * l) + cs);
      m = m_new;
    }
    // Pass 2: outputs.
    double* p = out.p.data() + r * v;
    double* logp = out.logp.data() + r * v;
    const std::int64_t target = prm.targets[static_cast<std::size_t>(r)];
    if (guard && l == A(0)) {  // nothing contributed: the defined fully masked row
      std::fill(p, p + v, 0.0);
      std::fill(logp, logp + v, -std::numeric_limits<double>::infinity());
      out.lse[static_cast<std::size_t>(r)] = -std::numeric_limits<double>::infinity();
      out.ce[static_cast<std::size_t>(r)] = 0.0;
      continue;
    }
    const A log_l = std::log(l);
    for (std::int64_t i = 0; i < v; ++i) {
      const A zi = z[static_cast<std::size_t>(i)];
      p[i] = static_cast<double>(round_out(exp_fn(zi - m) / l));
      logp[i] = static_cast<double>(round_out((zi - m) - log_l));
    }
    out.lse[static_cast<std::size_t>(r)] = static_cast<double>(round_lse(m + log_l));
    out.ce[static_cast<std::size_t>(r)] =
        target < 0 ? 0.0 : static_cast<double>(round_lse(log_l - (z[static_cast<std::size_t>(target)] - m)));
  }
  return out;
}

}  // namespace

softmax_states default_softmax_states(formats::format_id input) {
  softmax_states st;
  st.x = input;
  return st;
}

void set_softmax_state(softmax_states& st, std::string_view name, formats::format_id f,
                       const std::string& place) {
  formats::format_id* s = slot(st, name);
  if (s == nullptr)
    throw_input_error(place, fmt::format("unknown softmax state '{}' (known: {})", name,
                                         fmt::join(k_names, ", ")));
  *s = f;
}

std::span<const std::string_view> softmax_state_names() { return k_names; }

formats::format_id get_softmax_state(const softmax_states& st, std::string_view name) {
  formats::format_id* s = slot(const_cast<softmax_states&>(st), name);
  if (s == nullptr) throw_input_error("state", fmt::format("unknown softmax state '{}'", name));
  return *s;
}

bool softmax_fault_supported(fault f) { return kernels::applies(f, kernels::k_emu_softmax); }

bool looped_softmax_config::has(fault f) const {
  return std::find(faults.begin(), faults.end(), f) != faults.end();
}

std::string looped_softmax_config::describe(formats::format_id input) const {
  std::string s = fmt::format("emu-softmax[chunk={}", chunk);
  const softmax_states d = default_softmax_states(input);
  for (std::string_view n : k_names)
    if (get_softmax_state(states, n) != get_softmax_state(d, n))
      s += fmt::format(",{}={}", n, formats::name(get_softmax_state(states, n)));
  if (exp2) s += ",exp=exp2";
  if (!faults.empty()) {
    std::vector<std::string_view> names;
    for (fault f : faults) names.push_back(to_string(f));
    s += fmt::format(",inject={}", fmt::join(names, "+"));
  }
  return s + "]";
}

softmax_result looped_softmax(std::span<const double> logits, const softmax_params& prm,
                              const looped_softmax_config& cfg) {
  if (cfg.chunk < 1) throw_input_error("--chunk", fmt::format("must be positive, got {}", cfg.chunk));
  for (fault f : cfg.faults)
    if (!softmax_fault_supported(f))
      throw_input_error("--inject", fmt::format("fault '{}' does not apply to the looped softmax (it has {})",
                                                to_string(f), kernels::fault_names(kernels::k_emu_softmax)));
  if (prm.vocab < 1 || logits.size() != prm.targets.size() * static_cast<std::size_t>(prm.vocab))
    throw_input_error("looped_softmax", "logits are not [rows, vocab]");
  softmax_states st = cfg.states;
  if (cfg.has(fault::m_rowsum_bf16)) st.l = format_id::m_bf16;
  constexpr auto f64 = format_id::m_f64;
  const bool a64 = st.x == f64 || st.m == f64 || st.l == f64 || st.out == f64 || st.lse == f64;
  return a64 ? run<double>(logits, prm, cfg, st) : run<float>(logits, prm, cfg, st);
}

}  // namespace numprobe::emu
