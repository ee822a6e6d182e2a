// The emulated FlashAttention kernel with every state in fp64 computes the same function as the
// reference: at lengths around its own key tile, every mask, T != S, GQA, Bq != Bk, with exp
// and with exp2. Also: fully masked rows never give NaN unless the empty-row guard is removed.
#include <bit>
#include <numeric>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/kernels/emu_test_support.hpp"

namespace numprobe::emu::testing {
namespace {

struct match_param {
  attention_case c;
  std::int64_t tile_q = 64;
  std::int64_t tile_k = 64;
  bool exp2 = true;

  [[nodiscard]] std::string id() const {
    return sanitize(fmt::format("{}_tile{}x{}_{}", c.id(), tile_q, tile_k, exp2 ? "exp2" : "exp"));
  }
  friend void PrintTo(const match_param& p, std::ostream* os) { *os << p.id(); }
};

// Lengths derived from the key tile (test design rule 1), plus one long length.
std::vector<std::int64_t> tile_lengths(std::int64_t bk) {
  return {1, bk - 1, bk, bk + 1, 2 * bk + 1, 4097};
}

attention_case base_case(std::int64_t s, std::int64_t t, mask_kind mask, std::int64_t window) {
  attention_case c;
  c.seq = s;
  c.queries = t;
  c.heads = 4;  // GQA: group of 2, heads differ in Q and in K/V
  c.kv_heads = 2;
  c.head_dim = 16;
  c.mask = mask;
  c.window = window;
  c.seed = 11 + static_cast<std::uint64_t>(s);
  if (mask == mask_kind::m_ranges) c.ranges = seeded_ranges(c.t(), s, c.seed);
  return c;
}

std::vector<match_param> match_params() {
  std::vector<match_param> out;
  std::set<std::string> seen;  // ids so far: one lookup per case, not a rescan (startup time)
  const std::pair<std::int64_t, std::int64_t> tiles[] = {{16, 16}, {32, 16}, {8, 24}};
  for (auto [bq, bk] : tiles)
    for (std::int64_t s : tile_lengths(bk))
      for (bool e2 : {true, false}) {
        // bq and bk by init-capture: clang before 16 cannot capture structured bindings.
        auto add = [&, bq = bq, bk = bk](attention_case c) {
          match_param prm{std::move(c), bq, bk, e2};
          // Short lengths make some shapes coincide (T = S/3 + 1 = S at S = 1): keep one.
          if (!seen.insert(prm.id()).second) return;
          out.push_back(std::move(prm));
        };
        add(base_case(s, 0, mask_kind::m_none, 0));
        add(base_case(s, 0, mask_kind::m_causal, 0));
        add(base_case(s, s / 3 + 1, mask_kind::m_causal, 0));  // T < S: bottom-right matters
        add(base_case(s, s + 5, mask_kind::m_causal, 0));      // T > S: fully masked rows
        add(base_case(s, s / 2 + 1, mask_kind::m_causal_top_left, 0));
        add(base_case(s, 0, mask_kind::m_window, bk + 3));     // window edge inside a tile
        add(base_case(s, 0, mask_kind::m_ranges, 0));
      }
  // Softcap, and a realistic head size, once each at a length crossing many tiles.
  attention_case cap = base_case(300, 0, mask_kind::m_causal, 0);
  cap.softcap = 5.0;
  out.push_back({cap, 32, 16, true});
  attention_case wide = base_case(1000, 0, mask_kind::m_none, 0);
  wide.head_dim = 128;
  wide.heads = 6;
  wide.kv_heads = 2;
  out.push_back({wide, 64, 64, true});
  return out;
}

class emu_matches_reference : public ::testing::TestWithParam<match_param> {};

TEST_P(emu_matches_reference, all_fp64_states_equal_reference) {
  const match_param& prm = GetParam();
  const attention_inputs in(prm.c, false);
  const auto rows = test_rows(prm.c, prm.tile_q, prm.tile_k);
  const attention_output got = flash_forward(in, all_f64_config(prm.tile_q, prm.tile_k, prm.exp2), rows);
  const attention_output ref = reference_on(in, rows);
  ASSERT_EQ(got.o.size(), ref.o.size());
  ASSERT_EQ(got.rows, rows);
  // The kernel's output starts poisoned with NaN; none may survive (every element written).
  ASSERT_EQ(count_nan(got), 0u);

  // Bound 1e-12 relative (row-normwise for O, and relative to max(1, |LSE|)). Basis: every
  // step runs in double (u = 1.1e-16); the online softmax adds one rescale rounding per key
  // tile and the running sums have at most 4097 terms, so the error is <= ~5e-13 in the worst
  // case; exp2 with a log2(e) prescale adds |x| u relative for |x| < 40.
  constexpr double bound = 1e-12;
  const std::int64_t hq = prm.c.heads, d = prm.c.head_dim;
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::int64_t h = 0; h < hq; ++h) {
      const double lse_ref = ref.lse[i * static_cast<std::size_t>(hq) + static_cast<std::size_t>(h)];
      const double lse_got = got.lse[i * static_cast<std::size_t>(hq) + static_cast<std::size_t>(h)];
      double num = 0.0, den = 0.0;
      for (std::int64_t e = 0; e < d; ++e) {
        const double diff = got.o_at(i, h, e) - ref.o_at(i, h, e);
        num += diff * diff;
        den += ref.o_at(i, h, e) * ref.o_at(i, h, e);
      }
      if (std::isinf(lse_ref)) {  // fully masked row: O = 0 exactly, LSE = -inf
        EXPECT_EQ(lse_got, lse_ref) << "row " << rows[i] << " head " << h;
        EXPECT_EQ(num, 0.0) << "row " << rows[i] << " head " << h;
        continue;
      }
      EXPECT_LE(std::sqrt(num), bound * std::sqrt(den)) << "row " << rows[i] << " head " << h;
      EXPECT_LE(std::fabs(lse_got - lse_ref), bound * std::max(1.0, std::fabs(lse_ref)))
          << "row " << rows[i] << " head " << h;
    }
}

INSTANTIATE_TEST_SUITE_P(emu, emu_matches_reference, ::testing::ValuesIn(match_params()),
                         [](const auto& info) { return info.param.id(); });

// --- Fully masked rows -----------------------------------------------------------------------

struct masked_param {
  attention_case c;
  std::int64_t tile_q, tile_k;
  std::vector<fault> faults;  // never no-empty-guard: every other fault keeps the guard

  [[nodiscard]] std::string id() const {
    std::string f = faults.empty() ? "clean" : std::string(to_string(faults[0]));
    return sanitize(fmt::format("{}_tile{}x{}_{}", c.id(), tile_q, tile_k, f));
  }
  friend void PrintTo(const masked_param& p, std::ostream* os) { *os << p.id(); }
};

std::vector<masked_param> masked_params() {
  std::vector<masked_param> out;
  std::vector<std::vector<fault>> fault_sets{{}};
  for (fault f : all_faults())
    if (f != fault::m_no_empty_guard) fault_sets.push_back({f});
  for (const auto& fs : fault_sets) {
    out.push_back({base_case(40, 70, mask_kind::m_causal, 0), 16, 16, fs});  // 30 empty rows
    out.push_back({base_case(200, 0, mask_kind::m_window, 5), 64, 16, fs});  // Bq > W
    out.push_back({base_case(100, 0, mask_kind::m_ranges, 0), 16, 16, fs});
  }
  return out;
}

class emu_masked_rows : public ::testing::TestWithParam<masked_param> {};

TEST_P(emu_masked_rows, never_nan_with_the_guard) {
  const masked_param& prm = GetParam();
  flash_config cfg;  // the default bf16 kernel
  cfg.tile_q = prm.tile_q;
  cfg.tile_k = prm.tile_k;
  cfg.faults = prm.faults;
  const attention_inputs in(prm.c, false);
  const auto rows = test_rows(prm.c, prm.tile_q, prm.tile_k);
  const attention_output got = flash_forward(in, cfg, rows);
  EXPECT_EQ(count_nan(got), 0u);
  // Rows the reference defines as empty are exactly O = 0, LSE = -inf (an exact value).
  // mask-top-left changes which rows are empty on purpose; only the NaN check applies to it.
  if (cfg.has(fault::m_mask_top_left)) return;
  const attention_output ref = reference_on(in, rows);
  std::size_t empty = 0;
  for (std::size_t i = 0; i < ref.lse.size(); ++i) {
    if (!std::isinf(ref.lse[i])) continue;
    ++empty;
    EXPECT_EQ(got.lse[i], ref.lse[i]);
    for (std::int64_t e = 0; e < prm.c.head_dim; ++e) {
      EXPECT_EQ(got.o[i * static_cast<std::size_t>(prm.c.head_dim) + static_cast<std::size_t>(e)], 0.0);
    }
  }
  if (prm.c.mask != mask_kind::m_window) {
    EXPECT_GT(empty, 0u) << "the case must contain empty rows";
  }
}

INSTANTIATE_TEST_SUITE_P(emu, emu_masked_rows, ::testing::ValuesIn(masked_params()),
                         [](const auto& info) { return info.param.id(); });

// The same window case does produce NaN once the guard is removed: the test above can fail.
TEST(emu_masked_rows_fault, no_empty_guard_lets_nan_through) {
  const attention_case c = base_case(200, 0, mask_kind::m_window, 5);
  flash_config cfg;
  cfg.tile_q = 64;
  cfg.tile_k = 16;
  cfg.faults = {fault::m_no_empty_guard};
  const attention_inputs in(c, false);
  const auto rows = test_rows(c, cfg.tile_q, cfg.tile_k);
  EXPECT_GT(count_nan(flash_forward(in, cfg, rows)), 0u);
}

// The query tile leaves no trace in a correct kernel's output (docs/audit.md, "Tiles": why
// tile inference reports no query tile). Default (bf16) states, where any extra rounding would
// show; masks whose diagonal or window makes a query tile walk key tiles masked for some rows.
TEST(emu_query_tile, output_bits_do_not_depend_on_the_query_tile) {
  const attention_case cases[] = {base_case(300, 0, mask_kind::m_causal, 0),
                                  base_case(300, 131, mask_kind::m_causal, 0),
                                  base_case(300, 0, mask_kind::m_window, 37)};
  for (const attention_case& c : cases) {
    const attention_inputs in(c, false);
    std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
    std::iota(rows.begin(), rows.end(), std::int64_t{0});
    flash_config cfg;
    cfg.tile_k = 32;
    cfg.tile_q = 16;
    const attention_output first = flash_forward(in, cfg, rows);
    for (const std::int64_t tq : {48, 64, 128}) {
      cfg.tile_q = tq;
      const attention_output other = flash_forward(in, cfg, rows);
      ASSERT_EQ(other.o.size(), first.o.size());
      std::size_t differ = 0;
      for (std::size_t i = 0; i < first.o.size(); ++i)
        differ += std::bit_cast<std::uint64_t>(first.o[i]) != std::bit_cast<std::uint64_t>(other.o[i]);
      for (std::size_t i = 0; i < first.lse.size(); ++i)
        differ += std::bit_cast<std::uint64_t>(first.lse[i]) != std::bit_cast<std::uint64_t>(other.lse[i]);
      EXPECT_EQ(differ, 0u) << c.id() << " tile_q 16 vs " << tq;
    }
  }
}

// The same comparison sees a fault tied to query tiles: without the empty-row guard, a row that
// meets a key tile before any key of its window gets NaN, and which rows meet one depends on the
// hull of keys their query tile walks. So the comparison above can fail.
TEST(emu_query_tile, a_fault_can_depend_on_the_query_tile) {
  const attention_case c = base_case(200, 0, mask_kind::m_window, 5);
  const attention_inputs in(c, false);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
  std::iota(rows.begin(), rows.end(), std::int64_t{0});
  flash_config cfg;
  cfg.tile_k = 16;
  cfg.faults = {fault::m_no_empty_guard};
  cfg.tile_q = 16;
  const attention_output a = flash_forward(in, cfg, rows);
  cfg.tile_q = 64;
  const attention_output b = flash_forward(in, cfg, rows);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.o.size(); ++i)
    differ += std::bit_cast<std::uint64_t>(a.o[i]) != std::bit_cast<std::uint64_t>(b.o[i]);
  EXPECT_GT(differ, 0u);
}

}  // namespace
}  // namespace numprobe::emu::testing
