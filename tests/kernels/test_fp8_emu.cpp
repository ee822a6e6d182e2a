// FP8 attention emulation (issue 9): the three quantization points (K/V cache with scales, P
// with and without pre-scale, the limited-precision MMA accumulator with promotion), each
// fault detected under an input that exposes it; fnuz and e5m2 variants included.
#include <cmath>
#include <gtest/gtest.h>
#include <numbers>
#include <numeric>

#include "numprobe/base/error.hpp"
#include "numprobe/reference/attention.hpp"
#include "src/kernels/emu/flash_attention.hpp"

namespace numprobe::emu {
namespace {

using formats::format_id;

attention_case make(std::int64_t s, input_dist d, format_id in = format_id::m_bf16) {
  attention_case c;
  c.queries = 4;
  c.seq = s;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 64;
  c.dtype = in;
  c.dist = d;
  c.mask = mask_kind::m_none;
  c.seed = 31;
  return c;
}

struct err {
  double o = 0, lse = 0;
};

err measure(const attention_case& c, flash_config cfg) {
  const attention_inputs in(c, false);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
  std::iota(rows.begin(), rows.end(), 0);
  cfg.states = default_states(c.dtype);
  const auto k = flash_forward(in, cfg, rows);
  const auto r = reference::attention(c, in.q_rows(rows), rows, in.k(), in.v());
  double n = 0, d = 0;
  err e;
  for (std::size_t i = 0; i < r.o.size(); ++i) {
    n += (k.o[i] - r.o[i]) * (k.o[i] - r.o[i]);
    d += r.o[i] * r.o[i];
  }
  e.o = std::sqrt(n / d);
  for (std::size_t i = 0; i < r.lse.size(); ++i) e.lse = std::max(e.lse, std::fabs(k.lse[i] - r.lse[i]));
  return e;
}

flash_config kv_cfg(format_id f, kv_scale_layout l) {
  flash_config cfg;
  cfg.fp8.kv = true;
  cfg.fp8.kv_format = f;
  cfg.fp8.kv_scale = l;
  return cfg;
}

TEST(fp8_attention, kv_cache_error_stays_within_the_format_unit_roundoff) {
  for (format_id f : {format_id::m_e4m3fn, format_id::m_e4m3fnuz, format_id::m_e5m2})
    for (kv_scale_layout l : {kv_scale_layout::m_tensor, kv_scale_layout::m_head, kv_scale_layout::m_channel,
                              kv_scale_layout::m_token}) {
      const err e = measure(make(300, input_dist::m_normal), kv_cfg(f, l));
      // Basis: K and V each rounded once at relative u = 2^-(mantissa+1); O's relative RMS
      // error is about u (well below it for averages over many keys). Bound: one u.
      EXPECT_LE(e.o, formats::unit_roundoff(f)) << formats::name(f) << " " << to_string(l);
      EXPECT_GT(e.o, 1e-4) << "fp8 must leave a trace";
    }
}

TEST(fp8_attention, kv_scale_ignored_is_detected) {
  flash_config cfg = kv_cfg(format_id::m_e4m3fn, kv_scale_layout::m_head);
  const err clean = measure(make(300, input_dist::m_normal), cfg);
  cfg.faults = {fault::m_kv_scale_ignored};
  const err bad = measure(make(300, input_dist::m_normal), cfg);
  EXPECT_GT(bad.o, 10 * clean.o);
  // fnuz (max 240): the same scale bug, the same detection.
  flash_config fnuz = kv_cfg(format_id::m_e4m3fnuz, kv_scale_layout::m_token);
  const err fnuz_clean = measure(make(300, input_dist::m_normal), fnuz);
  fnuz.faults = {fault::m_kv_scale_ignored};
  EXPECT_GT(measure(make(300, input_dist::m_normal), fnuz).o, 10 * fnuz_clean.o);
}

// Inputs built for the hazard (NUMERICS.md, "a diffuse row with P ~ 1e-4"): key 0 scores 0,
// every other key scores -9, so exp(s - m) = 1.2e-4 < 2^-10 (e4m3's flush point) for 4095
// keys holding a third of the mass.
err measure_flush_row(flash_config cfg) {
  attention_case c = make(4096, input_dist::m_normal, format_id::m_f32);
  c.scale = 1.0;
  const std::int64_t D = c.head_dim, S = c.seq, T = c.t();
  std::vector<double> q(static_cast<std::size_t>(T * c.heads * D), 0.0), k(static_cast<std::size_t>(S * D), 0.0),
      v(static_cast<std::size_t>(S * D));
  for (std::int64_t i = 0; i < T * c.heads; ++i) q[static_cast<std::size_t>(i * D)] = 3.0;
  for (std::int64_t j = 1; j < S; ++j) k[static_cast<std::size_t>(j * D)] = -3.0;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0 + static_cast<double>(i % 7) / 8.0;
  const attention_inputs in(c, q, k, v);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
  std::iota(rows.begin(), rows.end(), 0);
  cfg.states = default_states(c.dtype);
  const auto out = flash_forward(in, cfg, rows);
  const auto r = reference::attention(c, in.q_rows(rows), rows, in.k(), in.v());
  double n = 0, d = 0;
  err e;
  for (std::size_t i = 0; i < r.o.size(); ++i) {
    n += (out.o[i] - r.o[i]) * (out.o[i] - r.o[i]);
    d += r.o[i] * r.o[i];
  }
  e.o = std::sqrt(n / d);
  for (std::size_t i = 0; i < r.lse.size(); ++i) e.lse = std::max(e.lse, std::fabs(out.lse[i] - r.lse[i]));
  return e;
}

TEST(fp8_attention, p_without_prescale_loses_numerator_mass_only) {
  flash_config cfg;
  cfg.fp8.p = true;
  cfg.fp8.p_format = format_id::m_e4m3fn;
  cfg.fp8.p_prescale = 256.0;  // P x 256 <= 256 < 448: the max is not clipped
  const err pre = measure_flush_row(cfg);
  cfg.faults = {fault::m_p_no_prescale};
  const err bad = measure_flush_row(cfg);
  RecordProperty("p_prescaled_rel_rms", std::to_string(pre.o));
  RecordProperty("p_no_prescale_rel_rms", std::to_string(bad.o));
  EXPECT_LT(pre.o, formats::unit_roundoff(format_id::m_e4m3fn));
  EXPECT_GT(bad.o, 10 * pre.o);  // the flushed third of the numerator
  // l keeps the unquantized P: the LSE still looks exact (fp32-level error).
  EXPECT_LT(bad.lse, 1e-4);
}

TEST(fp8_attention, accumulator_without_promotion_drifts_with_length) {
  const attention_case c = make(8192, input_dist::m_diffuse, format_id::m_f32);
  flash_config cfg;
  cfg.fp8.acc_promote = 4;
  const err promoted = measure(c, cfg);
  cfg.faults = {fault::m_acc_no_promotion};
  const err bad = measure(c, cfg);
  EXPECT_GT(bad.o, 5 * promoted.o);
  const err short_bad = measure(make(512, input_dist::m_diffuse, format_id::m_f32), cfg);
  EXPECT_GT(bad.o, 2 * short_bad.o);  // grows with the number of key tiles
}

// --acc-model (issue 31 item 3): P.V through a bit-accurate MMA model, instruction by
// instruction. The inputs make every value hand-derivable: Q = 0, so every score is 0 and every
// P is exactly 1 (l = S exactly); V holds one large value at key 0 and a small one at every
// other key, in every channel.
std::vector<double> model_row(flash_config cfg, format_id in, std::int64_t s, double big, double small) {
  attention_case c = make(s, input_dist::m_normal, in);
  c.queries = 1;
  c.heads = 1;
  c.scale = 1.0;
  const std::int64_t D = c.head_dim;
  std::vector<double> q(static_cast<std::size_t>(D), 0.0), k(static_cast<std::size_t>(s * D)),
      v(static_cast<std::size_t>(s * D), small);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = 0.25 + static_cast<double>(i % 5) / 8.0;
  for (std::int64_t e = 0; e < D; ++e) v[static_cast<std::size_t>(e)] = big;
  const attention_inputs ins(c, q, k, v);
  const std::vector<std::int64_t> rows = {0};
  cfg.states = default_states(c.dtype);
  return flash_forward(ins, cfg, rows).o;
}

flash_config e4m3_model(std::int64_t promote) {
  flash_config cfg = kv_cfg(format_id::m_e4m3fn, kv_scale_layout::m_head);
  cfg.fp8.p = true;
  cfg.fp8.p_format = format_id::m_e4m3fn;
  cfg.fp8.acc_promote = promote;
  cfg.fp8.acc_model = &find_mma_model("h200-wgmma-e4m3");
  return cfg;
}

TEST(fp8_attention_acc_model, wgmma_e4m3_chain_and_promotion_are_exact) {
  // V = 448 at key 0 (amax 448: the scale is exactly 1, the codes are the values) and 2^-6 (an
  // e4m3 normal) elsewhere. h200-wgmma-e4m3 aligns each k32 group and C to the largest exponent
  // and keeps 13 fraction bits: next to 448 = 1.75 * 2^8 the unit is 2^-5, so a 2^-6 product
  // is truncated away; summed from zero, 32 of them (0.5) are exact. S = 256, tile_k = 64.
  const std::int64_t S = 256, T = 64;
  const double small = std::ldexp(1.0, -6);
  const auto expect_all = [&](const std::vector<double>& o, double want, const char* what) {
    ASSERT_EQ(o.size(), 64u);
    for (double x : o) ASSERT_EQ(x, want) << what;
  };
  // One accumulator for the whole row (FA3 before the fix): every small product is lost.
  expect_all(model_row(e4m3_model(0), format_id::m_f32, S, 448.0, small), 448.0 / S, "no promotion");
  // Two-level every tile: tile 0 keeps only 448; each later tile sums its 64 small products
  // from zero (exact) and is added in fp32.
  expect_all(model_row(e4m3_model(1), format_id::m_f32, S, 448.0, small), (448.0 + (S - T) * small) / S, "promote 1");
  // Every 2 tiles: tile 1 chains onto C = 448 and loses its products too.
  expect_all(model_row(e4m3_model(2), format_id::m_f32, S, 448.0, small), (448.0 + (S - 2 * T) * small) / S,
             "promote 2");
  // The no-promotion fault keeps the inner accumulator: the same as one accumulator.
  flash_config bad = e4m3_model(1);
  bad.faults = {fault::m_acc_no_promotion};
  expect_all(model_row(bad, format_id::m_f32, S, 448.0, small), 448.0 / S, "acc-no-promotion");
  // Without the model, fp32 keeps every product: (448 + 255 * 2^-6) / 256, exact in fp32.
  flash_config plain = e4m3_model(0);
  plain.fp8.acc_model = nullptr;
  expect_all(model_row(plain, format_id::m_f32, S, 448.0, small), (448.0 + (S - 1) * small) / S, "fp32");
}

TEST(fp8_attention_acc_model, mma_bf16_truncates_each_instruction_result) {
  // h200-mma-bf16: k16 groups with 25 fraction bits inside, the result truncated to fp32's 23.
  // V = 1 at key 0 and 2^-25 elsewhere (both bf16 values, stored as f32). The first instruction
  // holds 1 + 15 * 2^-25 = 1 + 3.75 * 2^-23 and truncates it to 1 + 3 * 2^-23; each later one
  // adds 16 * 2^-25 = 4 * 2^-23 exactly. S = 256: 16 instructions, 1 + 63 * 2^-23 (exact would
  // be 1 + 63.75 * 2^-23).
  flash_config cfg;
  cfg.fp8.acc_model = &find_mma_model("h200-mma-bf16");
  const auto o = model_row(cfg, format_id::m_f32, 256, 1.0, std::ldexp(1.0, -25));
  ASSERT_EQ(o.size(), 64u);
  for (double x : o) ASSERT_EQ(x, (1.0 + 63.0 * std::ldexp(1.0, -23)) / 256.0);
}

// --acc-fma: the promotion as fma(o_acc, alpha, o) instead of a rounded rescale, then an add.
// S = 128, two key tiles, promotion every tile, h200-wgmma-e4m3. Q = e_0, so a key's score is its
// K[0]: 0 on tile 0, d on tile 1; every P is exactly 1 and tile 1 rescales by alpha =
// exp2(fl(-d * log2e)) (fp32). V = 448 at key 0, 2^-6 on keys 1..63 (truncated away next to 448
// by the model's 13 bits), -2^-6 on tile 1 (summed exactly: -1). So o_acc = 448 after tile 0,
// and tile 1 promotes 448 * alpha - 1: rounded once (fused) or as fl(fl(448 * alpha) - 1). d is
// picked so that 448 * alpha lies just above 128, where the two differ (the sum drops a binade).
std::vector<double> fma_row(bool fused, float d) {
  attention_case c = make(128, input_dist::m_normal, format_id::m_f32);
  c.queries = 1;
  c.heads = 1;
  c.scale = 1.0;
  const std::int64_t S = 128, D = c.head_dim;
  std::vector<double> q(static_cast<std::size_t>(D), 0.0), k(static_cast<std::size_t>(S * D), 0.0),
      v(static_cast<std::size_t>(S * D));
  q[0] = 1.0;
  for (std::int64_t key = 0; key < S; ++key)
    for (std::int64_t e = 0; e < D; ++e) {
      const auto i = static_cast<std::size_t>(key * D + e);
      if (e == 0 && key >= 64) k[i] = d;
      v[i] = key == 0 ? 448.0 : key < 64 ? std::ldexp(1.0, -6) : -std::ldexp(1.0, -6);
    }
  const attention_inputs ins(c, q, k, v);
  flash_config cfg = e4m3_model(1);
  cfg.fp8.acc_fma = fused;
  cfg.states = default_states(c.dtype);
  return flash_forward(ins, cfg, std::vector<std::int64_t>{0}).o;
}

TEST(fp8_attention_acc_model, acc_fma_rounds_the_promotion_once) {
  const auto alpha_of = [](float d) { return std::exp2(-d * static_cast<float>(std::numbers::log2e)); };
  float d = 0;
  for (float cand = 1.2480f; cand < 1.2560f; cand += 1.0f / 1024) {
    // Two roundings (the multiply, then the add; separate statements: clang contracts a*b-c
    // within one expression) against one.
    const float a = alpha_of(cand);
    const float prod = 448.0f * a;
    const float sep = prod - 1.0f;
    const float one = std::fma(448.0f, a, -1.0f);
    if (sep != one && prod >= 128.0f) {
      d = cand;
      break;
    }
  }
  ASSERT_NE(d, 0.0f) << "no score in the sweep separates the two roundings";
  const float a = alpha_of(d);
  // l: 64 ones on tile 0; on tile 1 alpha * 64 (exact), then 64 ones added one by one in fp32.
  float l = a * 64.0f;
  for (int i = 0; i < 64; ++i) l = l + 1.0f;
  const float prod = 448.0f * a;
  const float sep_num = prod - 1.0f;
  const double want_fused = std::fma(448.0f, a, -1.0f) / l;
  const double want_sep = sep_num / l;
  const auto fused = fma_row(true, d), sep = fma_row(false, d);
  ASSERT_EQ(fused.size(), 64u);
  ASSERT_EQ(sep.size(), 64u);
  for (std::size_t e = 0; e < 64; ++e) {
    EXPECT_EQ(fused[e], want_fused) << e;
    EXPECT_EQ(sep[e], want_sep) << e;
  }
  EXPECT_NE(want_fused, want_sep);
  // With alpha = 1 on every tile (every score 0: fma_row's d = 0) the two are the same.
  EXPECT_EQ(fma_row(true, 0.0f), fma_row(false, 0.0f));
}

TEST(fp8_attention_acc_model, refuses_operands_the_mma_would_not_read) {
  const auto code_of = [](flash_config cfg, double small) {
    try {
      (void)model_row(std::move(cfg), format_id::m_f32, 128, 448.0, small);
    } catch (const numprobe::error& e) {
      EXPECT_EQ(e.place(), "--acc-model") << e.what();
      return e.code();
    }
    return exit_code::m_ok;
  };
  const double small = std::ldexp(1.0, -6);
  EXPECT_EQ(code_of(e4m3_model(1), small), exit_code::m_ok);
  flash_config no_p = e4m3_model(1);
  no_p.fp8.p = false;  // the fp8 model reads P's fp8 code
  EXPECT_EQ(code_of(no_p, small), exit_code::m_input);
  flash_config e5m2_kv = e4m3_model(1);
  e5m2_kv.fp8.kv_format = format_id::m_e5m2;
  EXPECT_EQ(code_of(e5m2_kv, small), exit_code::m_input);
  flash_config token = e4m3_model(1);
  token.fp8.kv_scale = kv_scale_layout::m_token;  // varies along the reduction
  EXPECT_EQ(code_of(token, small), exit_code::m_input);
  flash_config bf16_with_fp8 = e4m3_model(1);
  bf16_with_fp8.fp8.acc_model = &find_mma_model("h200-mma-bf16");
  EXPECT_EQ(code_of(bf16_with_fp8, small), exit_code::m_input);
  // A bf16 model with V values that are not bf16 (1 + 2^-10 needs 10 fraction bits).
  flash_config bf16;
  bf16.fp8.acc_model = &find_mma_model("h200-mma-bf16");
  EXPECT_EQ(code_of(bf16, 1.0 + std::ldexp(1.0, -10)), exit_code::m_input);
  EXPECT_EQ(code_of(bf16, 1.0 + std::ldexp(1.0, -7)), exit_code::m_ok);
}

}  // namespace
}  // namespace numprobe::emu
