// The emulated looped softmax: with every state in fp64 it equals the reference (1e-12), at any
// chunk size and mask; each of its faults is detected under an input that exposes it and
// invisible under one that does not.
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>

#include "numprobe/base/error.hpp"
#include "numprobe/reference/softmax.hpp"
#include "src/kernels/emu/looped_softmax.hpp"

namespace numprobe::emu {
namespace {

using formats::format_id;

struct run_result {
  softmax_result k;
  softmax_output ref;
};

run_result run(const softmax_case& c, const looped_softmax_config& cfg) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows));
  std::iota(rows.begin(), rows.end(), 0);
  const auto x = softmax_logits(c, rows, true);
  std::vector<std::int64_t> targets;
  for (auto r : rows) targets.push_back(softmax_target(c, r));
  return {looped_softmax(x, {c.vocab, c.temperature, c.softcap, targets}, cfg), reference::softmax(c, x, rows)};
}

softmax_case make(std::int64_t v, input_dist d, softmax_mask m = softmax_mask::m_none,
                  std::int64_t masked = 0, std::int64_t rows = 2) {
  softmax_case c;
  c.vocab = v;
  c.rows = rows;
  c.dist = d;
  c.mask = m;
  c.masked = masked;
  c.seed = 5;
  return c;
}

looped_softmax_config all_f64(std::int64_t chunk) {
  looped_softmax_config cfg;
  cfg.chunk = chunk;
  cfg.states = {format_id::m_f64, format_id::m_f64, format_id::m_f64, format_id::m_f64, format_id::m_f64};
  return cfg;
}

bool any_nan(const softmax_result& r) {
  for (double v : r.p) if (std::isnan(v)) return true;
  for (double v : r.lse) if (std::isnan(v)) return true;
  return false;
}

// ||p - p_ref|| / ||p_ref||
double p_rel_rms(const run_result& r) {
  double n = 0, d = 0;
  for (std::size_t i = 0; i < r.ref.p.size(); ++i) {
    n += (r.k.p[i] - r.ref.p[i]) * (r.k.p[i] - r.ref.p[i]);
    d += r.ref.p[i] * r.ref.p[i];
  }
  return std::sqrt(n / d);
}

TEST(looped_softmax, all_states_f64_equal_the_reference) {
  using d = input_dist;
  using m = softmax_mask;
  const std::vector<softmax_case> cases{make(4099, d::m_normal), make(4099, d::m_llm, m::m_padding),
                                        make(3000, d::m_rescale_stress, m::m_prefix, 1024),
                                        make(2500, d::m_shifted, m::m_banned), make(700, d::m_diffuse, m::m_all)};
  for (const auto& c0 : cases)
    for (std::int64_t chunk : {1, 7, 1024, 4096}) {
      softmax_case c = c0;
      c.temperature = chunk == 7 ? 0.8 : 1.0;
      c.softcap = chunk == 1024 ? 30.0 : 0.0;
      const auto r = run(c, all_f64(chunk));
      // Basis: the 1e-12 for an fp64 emulation; relative on p, relative-or-absolute
      // on log p / LSE / CE (as the reference's own proof), with the shifted rows' L*u term.
      const double b = c.dist == d::m_shifted ? 4 * 2.1e4 * 0x1.0p-53 : 1e-12;
      for (std::size_t i = 0; i < r.ref.p.size(); ++i) {
        if (r.ref.p[i] > 1e-280) ASSERT_LE(std::fabs(r.k.p[i] - r.ref.p[i]) / r.ref.p[i], b) << c.id() << " chunk " << chunk;
        else ASSERT_LE(std::fabs(r.k.p[i] - r.ref.p[i]), 1e-290) << c.id();
        if (std::isinf(r.ref.logp[i])) ASSERT_EQ(r.k.logp[i], r.ref.logp[i]);
        else ASSERT_LE(std::fabs(r.k.logp[i] - r.ref.logp[i]) / std::max(1.0, std::fabs(r.ref.logp[i])), b) << c.id();
      }
      for (std::size_t j = 0; j < r.ref.lse.size(); ++j) {
        if (std::isinf(r.ref.lse[j])) EXPECT_EQ(r.k.lse[j], r.ref.lse[j]) << c.id();
        else EXPECT_LE(std::fabs(r.k.lse[j] - r.ref.lse[j]) / std::max(1.0, std::fabs(r.ref.lse[j])), b) << c.id();
        EXPECT_LE(std::fabs(r.k.ce[j] - r.ref.ce[j]) / std::max(1.0, std::fabs(r.ref.ce[j])), b) << c.id();
      }
    }
}

TEST(looped_softmax, no_empty_guard_makes_nan_on_a_fully_masked_first_chunk_only) {
  looped_softmax_config cfg;
  cfg.chunk = 256;
  const softmax_case exposing = make(2000, input_dist::m_normal, softmax_mask::m_prefix, 256);
  const softmax_case hiding = make(2000, input_dist::m_normal, softmax_mask::m_padding, 256);
  const softmax_case all = make(600, input_dist::m_normal, softmax_mask::m_all);
  EXPECT_FALSE(any_nan(run(exposing, cfg).k));
  EXPECT_FALSE(any_nan(run(all, cfg).k));
  for (double l : run(all, cfg).k.lse) EXPECT_EQ(l, -INFINITY);  // the defined masked row
  cfg.faults = {fault::m_no_empty_guard};
  EXPECT_TRUE(any_nan(run(exposing, cfg).k));
  EXPECT_TRUE(any_nan(run(all, cfg).k));
  // A masked *trailing* chunk follows a finite max: exp(-inf - m) = 0, no NaN to see.
  EXPECT_FALSE(any_nan(run(hiding, cfg).k));
}

TEST(looped_softmax, rowsum_bf16_is_detected_on_long_diffuse_rows) {
  looped_softmax_config cfg;
  cfg.chunk = 256;
  cfg.states.x = format_id::m_f32;
  const softmax_case c = make(65536, input_dist::m_diffuse, softmax_mask::m_none, 0, 2);
  const double clean = p_rel_rms(run(c, cfg));
  cfg.faults = {fault::m_rowsum_bf16};
  const double faulty = p_rel_rms(run(c, cfg));
  // Basis: a correctly held fp32 state stays near fp32's unit roundoff (2^-24 ~ 6e-8) times
  // a few; a bf16 running sum carries bf16's 2^-9 ~ 2e-3 per fold.
  EXPECT_LT(clean, 20 * 0x1.0p-24);
  EXPECT_GT(faulty, 100 * clean);
  EXPECT_GT(faulty, 0x1.0p-12);
}

TEST(looped_softmax, finite_sentinel_collapses_shifted_rows_only) {
  looped_softmax_config cfg;
  cfg.chunk = 512;
  cfg.faults = {fault::m_finite_sentinel};
  softmax_case shifted = make(3000, input_dist::m_shifted);
  const auto bad = run(shifted, cfg);
  bool wrong = any_nan(bad.k);
  for (std::size_t r = 0; r < bad.ref.lse.size(); ++r)
    wrong |= !(std::fabs(bad.k.lse[r] - bad.ref.lse[r]) < 1.0);
  EXPECT_TRUE(wrong);
  const auto fine = run(make(3000, input_dist::m_normal), cfg);
  EXPECT_FALSE(any_nan(fine.k));
  EXPECT_LT(p_rel_rms(fine), 1e-5);
}

TEST(looped_softmax, rejects_faults_it_does_not_have_and_bad_chunks) {
  looped_softmax_config cfg;
  cfg.faults = {fault::m_skip_rescale};
  EXPECT_THROW((void)run(make(100, input_dist::m_normal), cfg), error);
  cfg.faults.clear();
  cfg.chunk = 0;
  EXPECT_THROW((void)run(make(100, input_dist::m_normal), cfg), error);
}

}  // namespace
}  // namespace numprobe::emu
