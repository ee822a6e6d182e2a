// Every injectable fault changes the emulated kernel's result measurably under the input family
// designed to expose it (NUMERICS.md, "Real bug classes"), stays inert where its mechanism is not
// exercised (test design rule 4: remove the mechanism and the error disappears), and the
// length-driven faults show error growing with the number of key tiles.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "src/kernels/emu/flash_decode.hpp"
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


// --- Issue 14: gqa-mod, index-wrap, wave-width, empty-split-nan --------------------------------

// Every row of a case, in order.
std::vector<std::int64_t> all_rows(const attention_case& c) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  return rows;
}

// The generated case with V replaced: V = kv_constant(g) on every element of KV head g.
double kv_constant(std::int64_t g) { return 1.0 + 0.5 * static_cast<double>(g); }  // exact in bf16
attention_inputs constant_v_per_kv_head(const attention_case& c) {
  const attention_inputs gen(c, false);
  std::vector<double> v(gen.v().size());
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = kv_constant(static_cast<std::int64_t>(i / static_cast<std::size_t>(c.head_dim)) % c.kv_heads);
  return attention_inputs(c, gen.q_all(), {gen.k().begin(), gen.k().end()}, std::move(v));
}

attention_case gqa_case(std::int64_t hq, std::int64_t hkv) {
  attention_case c = fault_case(3 * k_bk + 5, input_dist::m_normal, mask_kind::m_causal, 3);
  c.heads = hq;
  c.kv_heads = hkv;
  c.head_dim = 32;
  return c;
}

// gqa-mod: with a distinct constant V per KV head, every output element equals the constant of
// the KV head its query head read: h % Hkv under the fault, h / (Hq / Hkv) without it. Basis of
// the tolerance: P is rounded to bf16 for P.V while l sums the unrounded P, so O / c lies within
// (1 +- u)^2 after O's own bf16 rounding, plus the fp32 sums' S * 2^-24.
void expect_heads_read(const attention_output& out, const attention_case& c, bool mod, const std::string& what) {
  const double tol = 2 * k_u_bf16 + k_u_bf16 * k_u_bf16 + static_cast<double>(c.seq) * std::ldexp(1.0, -24);
  const std::int64_t group = c.heads / c.kv_heads;
  for (std::int64_t r = 0; r < c.rows(); ++r)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const double want = kv_constant(mod ? h % c.kv_heads : h / group);
      for (std::int64_t e = 0; e < c.head_dim; ++e) {
        const double got = out.o[static_cast<std::size_t>((r * c.heads + h) * c.head_dim + e)];
        ASSERT_LE(std::fabs(got - want), tol * want) << what << " row " << r << " head " << h << " got " << got;
      }
    }
}

TEST(emu_fault_gqa_mod, heads_read_kv_head_h_mod_hkv) {
  // Group sizes 1, 4, 7 (NUMERICS.md), a 3-KV-head case, and Hkv = 1.
  for (auto [hq, hkv] : {std::pair<std::int64_t, std::int64_t>{2, 2}, {8, 2}, {14, 2}, {12, 3}, {4, 1}}) {
    const attention_case c = gqa_case(hq, hkv);
    const attention_inputs in = constant_v_per_kv_head(c);
    const auto rows = all_rows(c);
    flash_config clean;
    flash_config faulty;
    faulty.faults = {fault::m_gqa_mod};
    const attention_output a = flash_forward(in, clean, rows), b = flash_forward(in, faulty, rows);
    const std::string what = fmt::format("Hq={} Hkv={}", hq, hkv);
    expect_heads_read(a, c, false, what + " clean");
    expect_heads_read(b, c, true, what + " gqa-mod");
    // Silent exactly where h % Hkv == h / group for every head: group 1, or a single KV head.
    const bool silent = hq == hkv || hkv == 1;
    EXPECT_EQ(a.o == b.o, silent) << what;
    // The decode kernel has the same fault.
    decode_config d;
    d.splits = 2;
    decode_config dfault = d;
    dfault.faults = {fault::m_gqa_mod};
    expect_heads_read(flash_decode(in, rows, d), c, false, what + " decode clean");
    expect_heads_read(flash_decode(in, rows, dfault), c, true, what + " decode gqa-mod");
  }
}

// index-wrap: key j is read from row j mod 2^15. The test builds those inputs itself (K and V
// rows j mod 32768): the faulty kernel on the true inputs must equal the clean kernel on them,
// bit for bit, and that is exact up to S = 32768 and wrong past it.
attention_inputs wrapped_inputs(const attention_inputs& in) {
  const attention_case& c = in.c();
  const auto row = static_cast<std::size_t>(c.kv_heads * c.head_dim);
  std::vector<double> k(in.k().size()), v(in.v().size());
  for (std::size_t j = 0; j < static_cast<std::size_t>(c.seq); ++j) {
    const std::size_t src = j % 32768;
    std::copy_n(in.k().data() + src * row, row, k.data() + j * row);
    std::copy_n(in.v().data() + src * row, row, v.data() + j * row);
  }
  return attention_inputs(c, in.q_all(), std::move(k), std::move(v));
}

TEST(emu_fault_index_wrap, exact_to_2_15_keys_wrong_past_it) {
  for (std::int64_t s : {std::int64_t{32768}, std::int64_t{32769}, std::int64_t{40960}}) {
    attention_case c = fault_case(s, input_dist::m_normal, mask_kind::m_none, 2);
    c.heads = 2;
    c.kv_heads = 1;
    c.head_dim = 32;
    const attention_inputs in(c, false);
    const auto rows = all_rows(c);
    flash_config clean;
    flash_config faulty;
    faulty.faults = {fault::m_index_wrap};
    const attention_output a = flash_forward(in, clean, rows), b = flash_forward(in, faulty, rows);
    decode_config d;
    decode_config dfault = d;
    dfault.faults = {fault::m_index_wrap};
    const attention_output da = flash_decode(in, rows, d), db = flash_decode(in, rows, dfault);
    if (s <= 32768) {
      EXPECT_EQ(a.o, b.o) << s;
      EXPECT_EQ(a.lse, b.lse) << s;
      EXPECT_EQ(da.o, db.o) << s;
      continue;
    }
    const attention_inputs w = wrapped_inputs(in);
    EXPECT_EQ(b.o, flash_forward(w, clean, rows).o) << s;
    EXPECT_EQ(b.lse, flash_forward(w, clean, rows).lse) << s;
    EXPECT_EQ(db.o, flash_decode(w, rows, d).o) << s;
    EXPECT_NE(a.o, b.o) << s;
    if (s == 40960) {  // a fifth of the keys replaced: an O(1) error, far above bf16 rounding
      const attention_output ref = reference_on(in, rows);
      EXPECT_GE(rel_rms(b, ref), 10.0 * rel_rms(a, ref)) << "clean " << rel_rms(a, ref);
      EXPECT_GE(rel_rms(b, ref), 2.0 * k_u_bf16);
      EXPECT_GE(rel_rms(db, ref), 2.0 * k_u_bf16);
    }
  }
}

// wave-width: a 32-wide butterfly on a 64-wide wavefront. Rows whose key tiles have at most 32
// columns are exact (bit-identical); a tile of 33..64 columns loses lanes 32..63 from m and l.
TEST(emu_fault_wave_width, rows_of_more_than_32_keys_in_a_tile_are_wrong) {
  // Causal T = S = 100 with 64x64 tiles: row t sees t + 1 keys, so rows 0..31 touch only
  // columns 0..31 of key tile 0 (exact) and rows 32..99 reach lane 32 or beyond (wrong).
  const attention_case c = fault_case(100, input_dist::m_normal, mask_kind::m_causal);
  const attention_inputs in(c, false);
  const auto rows = all_rows(c);
  flash_config clean;
  flash_config faulty;
  faulty.faults = {fault::m_wave_width};
  EXPECT_EQ(faulty.reduction_width(), 32);
  const attention_output a = flash_forward(in, clean, rows), b = flash_forward(in, faulty, rows);
  const auto per_row = static_cast<std::size_t>(c.heads * c.head_dim);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const bool same = std::equal(a.o.begin() + static_cast<std::ptrdiff_t>(r * per_row),
                                 a.o.begin() + static_cast<std::ptrdiff_t>((r + 1) * per_row),
                                 b.o.begin() + static_cast<std::ptrdiff_t>(r * per_row));
    EXPECT_EQ(same, r < 32) << "row " << r << " sees " << r + 1 << " keys";
  }
  // Inert with key tiles of at most 32 columns, and on a 32-wide wavefront (an NVIDIA warp).
  flash_config narrow = faulty;
  narrow.tile_q = narrow.tile_k = 32;
  flash_config narrow_clean = clean;
  narrow_clean.tile_q = narrow_clean.tile_k = 32;
  EXPECT_EQ(flash_forward(in, narrow, rows).o, flash_forward(in, narrow_clean, rows).o);
  flash_config warp32 = faulty;
  warp32.wavefront_width = 32;
  EXPECT_EQ(warp32.reduction_width(), 32);
  EXPECT_EQ(flash_forward(in, warp32, rows).o, a.o);
}

// Which lanes reach the state: lane 0's, i.e. the reduction over lanes 0..31. With one key tile
// (S <= 64, no mask) the faulty LSE is then the LSE of the first 32 keys alone, and O is the
// true O scaled by exp(LSE_S - LSE_32) (every key in P.V, only 32 in l): both predicted from
// the reference.
TEST(emu_fault_wave_width, lane_0s_half_reaches_the_row_state) {
  for (std::int64_t s : {std::int64_t{33}, std::int64_t{48}, std::int64_t{64}}) {
    attention_case c = fault_case(s, input_dist::m_normal, mask_kind::m_none, 4);
    const attention_inputs in(c, false);
    const auto rows = all_rows(c);
    flash_config faulty;
    faulty.faults = {fault::m_wave_width};
    const attention_output b = flash_forward(in, faulty, rows);
    const attention_output ref = reference_on(in, rows);
    attention_case c32 = c;
    c32.seq = 32;
    const std::size_t prefix = static_cast<std::size_t>(32 * c.kv_heads * c.head_dim);
    const auto q = in.q_rows(rows);
    const attention_output ref32 = reference::attention(c32, q, rows, in.k().first(prefix), in.v().first(prefix));
    attention_output predicted = ref;
    // Basis: l sums P rounded to bf16 (each term within u relative), so |d log l| <= u; 1e-4
    // covers the fp32 scores and sums (64 terms, ~4e-6).
    const double lse_tol = k_u_bf16 + 1e-4;
    for (std::size_t i = 0; i < ref.lse.size(); ++i) {
      EXPECT_NEAR(b.lse[i], ref32.lse[i], lse_tol) << "S=" << s << " entry " << i;
      // ... and not the row's own LSE: the other s - 32 keys hold log(s / 32) ~ 0.4 nats or more.
      if (s >= 48) {
        EXPECT_GT(std::fabs(b.lse[i] - ref.lse[i]), lse_tol) << "S=" << s << " entry " << i;
      }
      const double scale = std::exp(ref.lse[i] - ref32.lse[i]);
      for (std::int64_t e = 0; e < c.head_dim; ++e) predicted.o[i * static_cast<std::size_t>(c.head_dim) + static_cast<std::size_t>(e)] *= scale;
    }
    // Basis: P and O rounded to bf16 (u each, relative) as in the clean kernel.
    EXPECT_LE(rel_rms(b, predicted), 2.0 * k_u_bf16) << "S=" << s;
    EXPECT_GE(rel_rms(b, ref), 2.0 * k_u_bf16) << "S=" << s;  // and it is wrong
  }
}

// empty-split-nan: which rows of a decode case have an empty split among non-empty ones,
// derived from the split geometry (decode_config: split_size keys per split, or a split count
// over tile-aligned splits of ceil(tiles / splits) tiles) and the bottom-right causal mask.
bool has_empty_split(std::int64_t len, std::int64_t t_len, std::int64_t t, bool causal, const decode_config& d) {
  const std::int64_t visible_end = causal ? len - t_len + t + 1 : len;  // keys [0, visible_end)
  if (visible_end <= 0) return false;  // every split empty: the merge's own all-empty guard
  const std::int64_t tiles = (len + d.tile_k - 1) / d.tile_k;
  const std::int64_t size = d.split_size > 0 ? d.split_size : (tiles + d.splits - 1) / d.splits * d.tile_k;
  const std::int64_t n = d.split_size > 0 ? (len + size - 1) / size : d.splits;
  return (n - 1) * size >= visible_end;  // the last split starts past the row's last key
}

struct split_param {
  std::int64_t seq, queries;
  mask_kind mask;
  std::int64_t splits, split_size;
  std::int64_t nan_rows;  // expected count, worked out by hand (checked against the geometry)
};

TEST(emu_fault_empty_split_nan, nan_exactly_in_rows_with_an_empty_split) {
  using mk = mask_kind;
  const split_param params[] = {
      {129, 8, mk::m_causal, 0, 64, 7},  // last split [128, 129): rows 0..6 end at 122..128
      {129, 8, mk::m_causal, 3, 0, 7},   // 3 tiles in 3 splits: the same last split
      {100, 1, mk::m_none, 4, 0, 1},     // 2 tiles in 4 splits: splits 2, 3 past the end
      {100, 4, mk::m_causal, 4, 0, 4},
      {129, 8, mk::m_causal, 1, 0, 0},   // one split is never empty
      {128, 8, mk::m_causal, 0, 64, 0},  // last split [64, 128): every row sees 121+ keys
      {1000, 4, mk::m_causal, 4, 0, 0},  // last split [768, 1000)
      {129, 1, mk::m_causal, 0, 64, 0},  // T = 1 sees every key
  };
  for (const split_param& prm : params) {
    attention_case c = fault_case(prm.seq, input_dist::m_normal, prm.mask, prm.queries);
    c.head_dim = 32;
    const attention_inputs in(c, false);
    const auto rows = all_rows(c);
    decode_config clean;
    clean.splits = prm.splits > 0 ? prm.splits : 4;
    clean.split_size = prm.split_size;
    decode_config faulty = clean;
    faulty.faults = {fault::m_empty_split_nan};
    const attention_output a = flash_decode(in, rows, clean), b = flash_decode(in, rows, faulty);
    const std::string what = fmt::format("S={} T={} splits={} split_size={}", prm.seq, prm.queries, prm.splits, prm.split_size);
    EXPECT_EQ(count_nan(a), 0u) << what;
    std::int64_t nan_rows = 0;
    for (std::int64_t r = 0; r < c.rows(); ++r) {
      const bool predicted = has_empty_split(c.seq, c.t(), r % c.t(), prm.mask == mk::m_causal, clean);
      for (std::int64_t h = 0; h < c.heads; ++h) {
        const std::size_t i = static_cast<std::size_t>(r * c.heads + h);
        const bool nan_o = std::isnan(b.o[i * static_cast<std::size_t>(c.head_dim)]);
        EXPECT_EQ(nan_o, predicted) << what << " row " << r << " head " << h;
        if (!predicted) {
          EXPECT_EQ(b.lse[i], a.lse[i]) << what << " row " << r;  // the other rows are untouched
          EXPECT_EQ(b.o[i * static_cast<std::size_t>(c.head_dim)], a.o[i * static_cast<std::size_t>(c.head_dim)]);
        }
      }
      nan_rows += predicted ? 1 : 0;
    }
    EXPECT_EQ(nan_rows, prm.nan_rows) << what;
  }
}

// A member with no key at all has every split empty: that is merge-nan-empty's case, and the
// merge's all-empty guard still gives O = 0, LSE = -inf; the other member's rows with an empty
// split among non-empty ones are NaN.
TEST(emu_fault_empty_split_nan, all_empty_rows_keep_the_merge_guard) {
  attention_case c = fault_case(129, input_dist::m_normal, mask_kind::m_causal, 8);
  c.batch = 2;
  c.head_dim = 32;
  const attention_inputs in(c, false);
  const auto rows = all_rows(c);
  const std::vector<std::int64_t> lengths{0, 129};
  decode_config cfg;
  cfg.split_size = 64;
  cfg.faults = {fault::m_empty_split_nan};
  const paged_kv kv = build_paged_kv(in, lengths, cfg.page_size, cfg.page_seed);
  const attention_output out = flash_decode(c, lengths, kv, in.q_rows(rows), rows, cfg);
  for (std::int64_t r = 0; r < c.rows(); ++r)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::size_t i = static_cast<std::size_t>(r * c.heads + h);
      if (r < c.t()) {
        EXPECT_EQ(out.lse[i], -std::numeric_limits<double>::infinity()) << r;
        EXPECT_EQ(out.o[i * static_cast<std::size_t>(c.head_dim)], 0.0) << r;
      } else {
        EXPECT_EQ(std::isnan(out.o[i * static_cast<std::size_t>(c.head_dim)]), r % c.t() <= 6) << r;
      }
    }
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
