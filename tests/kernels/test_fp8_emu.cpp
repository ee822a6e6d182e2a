// FP8 attention emulation (issue 9): the three quantization points (K/V cache with scales, P
// with and without pre-scale, the limited-precision MMA accumulator with promotion), each
// fault detected under an input that exposes it; fnuz and e5m2 variants included.
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>

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

}  // namespace
}  // namespace numprobe::emu
