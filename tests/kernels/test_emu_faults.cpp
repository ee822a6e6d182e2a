// Every injectable fault changes the emulated kernel's result measurably under the input family
// designed to expose it (NUMERICS.md, "Real bug classes"), stays inert where its mechanism is not
// exercised (test design rule 4: remove the mechanism and the error disappears), and the
// length-driven faults show error growing with the number of key tiles.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "tests/kernels/emu_test_support.hpp"

namespace numprobe::emu::testing {
namespace {

constexpr std::int64_t k_bk = 64;  // key tile of the kernel under test (and Bq)
// bf16 unit roundoff 2^-8 (RNE half-ulp of an 8-bit significand): the size of the error the
// final rounding of O alone can cause.
const double k_u_bf16 = formats::unit_roundoff(formats::format_id::m_bf16);

attention_case fault_case(std::int64_t s, input_dist dist, mask_kind mask = mask_kind::m_none,
                          std::int64_t t = 0, std::int64_t window = 0) {
  attention_case c;
  c.seq = s;
  c.queries = t;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.dist = dist;
  c.mask = mask;
  c.window = window;
  c.seed = 5;
  return c;
}

struct measured {
  double clean = 0.0;  // rel RMS of the fault-free default kernel vs the reference
  double faulty = 0.0; // rel RMS with the fault injected
  std::size_t clean_nan = 0, faulty_nan = 0;
  bool identical = false;  // faulty output bit-identical to the clean one
};

measured measure(const attention_case& c, fault f) {
  const attention_inputs in(c, false);
  const auto rows = test_rows(c, k_bk, k_bk, 32);
  flash_config clean;
  clean.tile_q = clean.tile_k = k_bk;
  flash_config faulty = clean;
  faulty.faults = {f};
  const attention_output ref = reference_on(in, rows);  // same rounded inputs: kernel-induced error
  const attention_output a = flash_forward(in, clean, rows);
  const attention_output b = flash_forward(in, faulty, rows);
  measured m;
  m.clean = rel_rms(a, ref);
  m.faulty = rel_rms(b, ref);
  m.clean_nan = count_nan(a);
  m.faulty_nan = count_nan(b);
  m.identical = a.o == b.o && a.lse == b.lse;
  return m;
}

// --- Detection: each fault under the family that exposes it -----------------------------------

struct expose_param {
  fault f;
  attention_case c;
  bool expects_nan = false;

  [[nodiscard]] std::string id() const { return sanitize(fmt::format("{}_{}", to_string(f), c.id())); }
  friend void PrintTo(const expose_param& p, std::ostream* os) { *os << p.id(); }
};

std::vector<expose_param> expose_params() {
  using d = input_dist;
  using mk = mask_kind;
  return {
      {fault::m_skip_rescale, fault_case(8 * k_bk, d::m_rescale_stress)},
      {fault::m_stale_max, fault_case(8 * k_bk, d::m_rescale_stress)},
      {fault::m_rowsum_bf16, fault_case(4096 + 1, d::m_diffuse)},
      {fault::m_rowsum_bf16, fault_case(4096 + 1, d::m_constant_v)},
      {fault::m_acc_bf16, fault_case(16384 + 1, d::m_constant_v)},
      {fault::m_mask_top_left, fault_case(4 * k_bk + 1, d::m_normal, mk::m_causal, 2 * k_bk)},
      {fault::m_no_empty_guard, fault_case(4 * k_bk + 1, d::m_normal, mk::m_window, 0, 5), true},
      {fault::m_no_empty_guard, fault_case(2 * k_bk, d::m_normal, mk::m_causal, 3 * k_bk), true},
      {fault::m_drop_tail_tile, fault_case(2 * k_bk + 5, d::m_normal)},
      {fault::m_finite_sentinel, fault_case(2 * k_bk + 1, d::m_shifted)},
  };
}

class emu_fault_exposed : public ::testing::TestWithParam<expose_param> {};

TEST_P(emu_fault_exposed, changes_the_result_measurably) {
  const expose_param& prm = GetParam();
  const measured m = measure(prm.c, prm.f);
  EXPECT_EQ(m.clean_nan, 0u);
  if (prm.expects_nan) {
    EXPECT_GT(m.faulty_nan, 0u) << "exp(-inf - -inf) must reach the output";
    return;
  }
  EXPECT_EQ(m.faulty_nan, 0u);
  // Measurable: at least 10x the clean kernel's own error (which sits at the bf16 level, see
  // test_emu_baseline), and at least 2 u_bf16, more than the final rounding of O can explain
  // (constant V makes the clean error ~1e-16).
  EXPECT_GE(m.faulty, 10.0 * m.clean) << "clean " << m.clean << " faulty " << m.faulty;
  EXPECT_GE(m.faulty, 2.0 * k_u_bf16) << "clean " << m.clean << " faulty " << m.faulty;
}

INSTANTIATE_TEST_SUITE_P(emu, emu_fault_exposed, ::testing::ValuesIn(expose_params()),
                         [](const auto& info) { return info.param.id(); });

// --- Specificity: where the mechanism is not exercised, the fault changes nothing -------------

struct inert_param {
  fault f;
  attention_case c;
  [[nodiscard]] std::string id() const { return sanitize(fmt::format("{}_{}", to_string(f), c.id())); }
  friend void PrintTo(const inert_param& p, std::ostream* os) { *os << p.id(); }
};

std::vector<inert_param> inert_params() {
  using d = input_dist;
  using mk = mask_kind;
  return {
      // The row max is set by the first key: alpha = exp(0) = 1 exactly, nothing to rescale.
      {fault::m_skip_rescale, fault_case(8 * k_bk + 1, d::m_max_first)},
      {fault::m_stale_max, fault_case(8 * k_bk + 1, d::m_max_first)},
      // One key tile: no rescale ever happens.
      {fault::m_skip_rescale, fault_case(k_bk, d::m_rescale_stress)},
      // T == S: top-left and bottom-right alignments coincide.
      {fault::m_mask_top_left, fault_case(4 * k_bk + 1, d::m_normal, mk::m_causal)},
      // No row ever meets a fully masked tile.
      {fault::m_no_empty_guard, fault_case(4 * k_bk + 1, d::m_normal, mk::m_causal)},
      // S a multiple of Bk: there is no partial tail tile.
      {fault::m_drop_tail_tile, fault_case(3 * k_bk, d::m_normal)},
      // N(0,1) logits never approach -1e4.
      {fault::m_finite_sentinel, fault_case(2 * k_bk + 1, d::m_normal)},
  };
}

class emu_fault_inert : public ::testing::TestWithParam<inert_param> {};

TEST_P(emu_fault_inert, leaves_the_result_bit_identical) {
  const inert_param& prm = GetParam();
  const measured m = measure(prm.c, prm.f);
  EXPECT_EQ(m.clean_nan, 0u);
  EXPECT_TRUE(m.identical) << "clean " << m.clean << " faulty " << m.faulty;
}

INSTANTIATE_TEST_SUITE_P(emu, emu_fault_inert, ::testing::ValuesIn(inert_params()),
                         [](const auto& info) { return info.param.id(); });

// --- Growth with length -----------------------------------------------------------------------

// A bf16 running sum of increments near 1 stalls at 256 (NUMERICS.md): with near-uniform
// attention, 2 key tiles (128 keys) stay below the stall, 8 tiles (512 keys) are past it.
TEST(emu_fault_growth, rowsum_bf16_error_grows_past_the_bf16_stall) {
  const measured short_run = measure(fault_case(2 * k_bk, input_dist::m_diffuse), fault::m_rowsum_bf16);
  const measured long_run = measure(fault_case(8 * k_bk, input_dist::m_diffuse), fault::m_rowsum_bf16);
  // Basis: past the stall l is capped near 256 while the true sum is ~512, an O(1) relative
  // error, against per-add roundings of at most 2^-8 relative below it.
  EXPECT_GE(long_run.faulty, 10.0 * short_run.faulty)
      << "2Bk " << short_run.faulty << " 8Bk " << long_run.faulty;
}

// A bf16 accumulator rounds O once per key tile: its error grows with the tile count.
TEST(emu_fault_growth, acc_bf16_error_grows_with_tiles) {
  const measured short_run = measure(fault_case(2 * k_bk, input_dist::m_constant_v), fault::m_acc_bf16);
  const measured long_run = measure(fault_case(256 * k_bk, input_dist::m_constant_v), fault::m_acc_bf16);
  // Basis: 128x more tiles; even a random walk of per-tile roundings (sqrt growth) gives ~11x,
  // a systematic drift more; 4x leaves margin for the short run's luck.
  EXPECT_GE(long_run.faulty, 4.0 * short_run.faulty)
      << "2Bk " << short_run.faulty << " 256Bk " << long_run.faulty;
}

// Skipping the rescale costs nothing on one tile (no rescale happens) and gives O(1) error once
// the max rises across tiles. Under rescale-stress the error saturates at O(1) from the second
// tile on (every tile ends up weighted alike), so growth is shown from 1 to 8 tiles.
TEST(emu_fault_growth, skip_rescale_error_grows_from_one_tile_to_many) {
  const measured one = measure(fault_case(k_bk, input_dist::m_rescale_stress), fault::m_skip_rescale);
  const measured two = measure(fault_case(2 * k_bk, input_dist::m_rescale_stress), fault::m_skip_rescale);
  const measured eight = measure(fault_case(8 * k_bk, input_dist::m_rescale_stress), fault::m_skip_rescale);
  EXPECT_TRUE(one.identical);  // exact: a single tile never rescales
  // Basis: the one-tile error is the clean kernel's bf16-level error (~u_bf16); a misweighted
  // softmax is an O(1) error, two orders of magnitude above it.
  EXPECT_GE(two.faulty, 10.0 * two.clean) << "clean " << two.clean << " faulty " << two.faulty;
  EXPECT_GE(eight.faulty, 50.0 * one.faulty) << "1 tile " << one.faulty << " 8 tiles " << eight.faulty;
}

}  // namespace
}  // namespace numprobe::emu::testing

// The disable-the-mechanism switch: forcing the rescale on every tile removes exactly the
// rescale faults' error (bit-identical to the clean kernel), and changes nothing on a clean one.
TEST(emu_force_rescale, removes_the_rescale_faults_and_leaves_clean_kernels_alone) {
  using namespace numprobe;
  attention_case c;
  c.seq = 300;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 32;
  c.dist = input_dist::m_rescale_stress;
  c.seed = 4;
  const attention_inputs in(c);
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 0; r < c.rows(); r += 7) rows.push_back(r);
  emu::flash_config clean;
  clean.tile_q = clean.tile_k = 32;
  const auto ref = emu::flash_forward(in, clean, rows);
  emu::flash_config forced = clean;
  forced.force_rescale = true;
  EXPECT_EQ(emu::flash_forward(in, forced, rows).o, ref.o);
  for (auto f : {emu::fault::m_skip_rescale, emu::fault::m_stale_max}) {
    emu::flash_config faulty = clean;
    faulty.faults = {f};
    EXPECT_NE(emu::flash_forward(in, faulty, rows).o, ref.o) << emu::to_string(f);
    faulty.force_rescale = true;
    EXPECT_EQ(emu::flash_forward(in, faulty, rows).o, ref.o) << emu::to_string(f);
  }
  // A fault outside the rescale path is untouched by the switch.
  emu::flash_config tail = clean;
  tail.faults = {emu::fault::m_rowsum_bf16};
  const auto tail_out = emu::flash_forward(in, tail, rows);
  tail.force_rescale = true;
  EXPECT_EQ(emu::flash_forward(in, tail, rows).o, tail_out.o);
  EXPECT_NE(tail_out.o, ref.o);
}
