// `numprobe quant --gemm` (quant_gemm.hpp): the dequant GEMM through a tensor-core model.
#include "probes/quant/quant_gemm.hpp"

#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <span>

#include "numprobe/base/error.hpp"
#include "numprobe/base/neumaier.hpp"
#include "probes/quant/quant_inputs.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::probes {
namespace {

// Every element's value in its format (the code as the MMA reads it), row-major.
std::vector<double> element_values(const formats::quant_result& q) {
  std::vector<double> v(q.codes.size());
  formats::decode_many(q.config.element, q.codes, v);
  return v;
}

// The effective scale of element (row, kb-th block along K) as fp32.
float block_scale(const formats::quant_result& q, std::int64_t row, std::int64_t kb) {
  const auto& g = q.grid;
  return static_cast<float>(q.blocks[static_cast<std::size_t>((row / g.block_rows) * g.grid_cols + kb)].scale);
}

// The promotion: outer + s * inner, each operation one fp32 rounding (separate statements, so no
// compiler contracts them into an fma).
float promote(float outer, float s, float inner) {
  const float scaled = s * inner;
  return outer + scaled;
}

// --acc-fma: the same promotion with one rounding.
float promote_fused(float outer, float s, float inner) { return std::fma(inner, s, outer); }

}  // namespace

double quant_gemm_report::acc_ratio() const {
  if (fp32_acc_rel_rms > 0) return acc_rel_rms / fp32_acc_rel_rms;
  return acc_rel_rms > 0 ? std::numeric_limits<double>::infinity() : 1.0;
}

quant_gemm_report run_quant_gemm(const quant_gemm_options& g, const formats::scheme_config& config,
                                 const formats::quant_result& w, const std::vector<double>& w_input, std::int64_t n,
                                 std::int64_t k, std::uint64_t seed) {
  if (g.tokens < 1 || g.tokens > 4096) throw_input_error("--gemm", fmt::format("TOKENS must be 1..4096, got {}", g.tokens));
  // X: LLM-like activations (a per-channel gain, 1% of channels x 20).
  return run_quant_gemm_with(g, config, w, w_input, n, k, make_quant_input(quant_dist::m_llm, seed + 1, g.tokens, k),
                             seed);
}

quant_gemm_report run_quant_gemm_with(const quant_gemm_options& g, const formats::scheme_config& config,
                                      const formats::quant_result& w, const std::vector<double>& w_input,
                                      std::int64_t n, std::int64_t k, const std::vector<double>& x,
                                      std::uint64_t seed) {
  quant_gemm_report r;
  if (g.tokens < 1 || g.tokens > 4096) throw_input_error("--gemm", fmt::format("TOKENS must be 1..4096, got {}", g.tokens));
  if (g.promote < 0) throw_input_error("--acc-promote", fmt::format("must be 0 or more instructions, got {}", g.promote));
  if (g.acc_model.empty()) throw_input_error("--gemm", "needs --acc-model NAME (numprobe mma --list-models)");
  const double work = static_cast<double>(g.tokens) * static_cast<double>(n) * static_cast<double>(k);
  if (work > 4.0e9)
    throw_input_error("--gemm", fmt::format("{} tokens x {} x {} is {:.3g} products; at most 4e9 (a smaller --shape or "
                                            "fewer tokens)", g.tokens, n, k, work));
  if (config.kind == formats::scheme_kind::m_asym)
    throw_input_error("--gemm", "a zero-point scheme has no MMA form here (the zero point is not a scale)");
  if (config.axis != 1 && config.kind != formats::scheme_kind::m_none && config.kind != formats::scheme_kind::m_tensor)
    throw_input_error("--gemm", "W's blocks must run along K, the columns (--axis 1)");
  const emu::mma_model& model = emu::find_mma_model(g.acc_model, "--acc-model");
  if (config.element != model.input)
    throw_input_error("--acc-model", fmt::format("{} reads {} operands; the scheme's elements are {} (--format)",
                                                 model.name, formats::name(model.input), formats::name(config.element)));
  const auto& wg = w.grid;
  const std::int64_t k_block = wg.grid_cols == 1 ? k : wg.block_cols;
  if (wg.grid_cols > 1 && k_block % model.k != 0)
    throw_input_error("--acc-model", fmt::format("{}'s instructions take K = {}; W's scale blocks along K hold {}, "
                                                 "not whole instructions", model.name, model.k, k_block));
  r.on = true;
  r.model = model.name;
  r.instruction = model.instruction;
  r.tokens = g.tokens;
  r.n = n;
  r.k = k;
  r.k_block = k_block;
  r.instructions_per_block = (k_block + model.k - 1) / model.k;
  r.promote = g.promote;
  r.acc_fma = g.acc_fma;
  const auto promote_chain = g.acc_fma ? promote_fused : promote;

  if (x.size() != static_cast<std::size_t>(g.tokens * k))
    throw_input_error("--gemm", fmt::format("X holds {} values, not {} x {}", x.size(), g.tokens, k));
  // X quantized with W's scheme, its blocks one row high.
  formats::scheme_config xc = config;
  if (xc.kind == formats::scheme_kind::m_block2d) xc.block_rows = 1;
  xc.seed = seed + 1;
  const formats::quant_result xq = formats::quantize(xc, x, g.tokens, k);
  if (xq.grid.grid_cols != wg.grid_cols)
    throw_input_error("--gemm", fmt::format("X's scale blocks along K ({}) do not line up with W's ({})",
                                            xq.grid.grid_cols, wg.grid_cols));
  const std::vector<double> xv = element_values(xq), wv = element_values(w);

  const std::int64_t outputs = g.tokens * n, kk = model.k;
  std::vector<double> y_model(static_cast<std::size_t>(outputs)), y_fp32(y_model.size()), y_q(y_model.size()),
      y_true(y_model.size());
  const std::string place = "--acc-model " + model.name;
#pragma omp parallel
  {
    std::vector<double> a(static_cast<std::size_t>(kk)), b(static_cast<std::size_t>(kk));
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t o = 0; o < outputs; ++o) {
      const std::int64_t m = o / n, j = o % n;
      const double* xr = xv.data() + m * k;
      const double* wr = wv.data() + j * k;
      float outer = 0.0f, outer32 = 0.0f;
      for (std::int64_t kb = 0; kb * k_block < k; ++kb) {
        const float s = block_scale(xq, m, kb) * block_scale(w, j, kb);
        const std::int64_t k0 = kb * k_block, k1 = std::min(k, k0 + k_block);
        // The model's accumulator: an fp32 or fp16 value, or an s32 integer kept exactly (not
        // every s32 is an fp32 value); converted to fp32 (nearest) when promoted.
        double inner = 0.0;
        float inner32 = 0.0f;
        std::int64_t since = 0;
        for (std::int64_t i0 = k0; i0 < k1; i0 += kk) {
          for (std::int64_t i = 0; i < kk; ++i) {
            const bool in = i0 + i < k1;
            a[static_cast<std::size_t>(i)] = in ? xr[i0 + i] : 0.0;
            b[static_cast<std::size_t>(i)] = in ? wr[i0 + i] : 0.0;
          }
          inner = emu::mma_dot(model, a, b, inner, place);
          for (std::int64_t i = 0; i < kk; ++i) {
            const float p = static_cast<float>(a[static_cast<std::size_t>(i)] * b[static_cast<std::size_t>(i)]);
            inner32 = inner32 + p;
          }
          if (g.promote > 0 && ++since == g.promote) {
            outer = promote_chain(outer, s, static_cast<float>(inner));
            outer32 = promote_chain(outer32, s, inner32);
            inner = 0.0;
            inner32 = 0.0f;
            since = 0;
          }
        }
        if (g.promote == 0 || since > 0) {
          outer = promote_chain(outer, s, static_cast<float>(inner));
          outer32 = promote_chain(outer32, s, inner32);
        }
      }
      neumaier q, t;
      for (std::int64_t i = 0; i < k; ++i) {
        q.add(xq.dequant[static_cast<std::size_t>(m * k + i)] * w.dequant[static_cast<std::size_t>(j * k + i)]);
        t.add(x[static_cast<std::size_t>(m * k + i)] * w_input[static_cast<std::size_t>(j * k + i)]);
      }
      y_model[static_cast<std::size_t>(o)] = outer;
      y_fp32[static_cast<std::size_t>(o)] = outer32;
      y_q[static_cast<std::size_t>(o)] = q.value();
      y_true[static_cast<std::size_t>(o)] = t.value();
    }
  }
  neumaier e_acc, e_fp32, e_rel, e_rel32, n_q, n_true;
  for (std::size_t o = 0; o < y_model.size(); ++o) {
    if (!std::isfinite(y_model[o])) {
      ++r.nonfinite;
      continue;
    }
    const double d = y_model[o] - y_q[o], d32 = y_fp32[o] - y_q[o];
    const double dt = y_model[o] - y_true[o], dt32 = y_fp32[o] - y_true[o];
    e_acc.add(d * d);
    e_fp32.add(d32 * d32);
    e_rel.add(dt * dt);
    e_rel32.add(dt32 * dt32);
    n_q.add(y_q[o] * y_q[o]);
    n_true.add(y_true[o] * y_true[o]);
    r.acc_max_abs = std::max(r.acc_max_abs, std::fabs(d));
  }
  // A zero reference with a non-zero error is an infinite relative error, never 0 (a gate on it
  // must not hold without evidence).
  const auto ratio = [](const neumaier& num, const neumaier& den) {
    if (den.value() > 0) return std::sqrt(num.value() / den.value());
    return num.value() > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  };
  r.acc_rel_rms = ratio(e_acc, n_q);
  r.fp32_acc_rel_rms = ratio(e_fp32, n_q);
  r.rel_rms = ratio(e_rel, n_true);
  r.fp32_rel_rms = ratio(e_rel32, n_true);
  r.outputs = std::move(y_model);
  r.fp32_outputs = std::move(y_fp32);
  r.x = xq;
  return r;
}

}  // namespace numprobe::probes
