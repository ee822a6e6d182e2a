// Emulated split-KV flash-decoding over a paged cache: fp64 states equal the decode reference
// (1e-12) for every split count and page size; empty splits, all-empty rows, a member with zero
// keys, lengths = 0, 1 mod the page size, and NaN-filled unused pages; each fault detected.
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>

#include "numprobe/base/error.hpp"
#include "numprobe/reference/decode.hpp"
#include "src/kernels/emu/flash_decode.hpp"

namespace numprobe::emu {
namespace {

using formats::format_id;

attention_case make(std::int64_t b, std::int64_t t, std::int64_t s, std::int64_t hq = 4, std::int64_t hkv = 2,
                    format_id in = format_id::m_bf16) {
  attention_case c;
  c.batch = b;
  c.queries = t;
  c.seq = s;
  c.heads = hq;
  c.kv_heads = hkv;
  c.head_dim = 32;
  c.dtype = in;
  c.mask = mask_kind::m_causal;
  c.seed = 21;
  return c;
}

struct outputs {
  attention_output kernel, ref;
};

outputs run(const attention_case& c, const std::vector<std::int64_t>& lengths, const decode_config& cfg) {
  const attention_inputs in(c, false);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
  std::iota(rows.begin(), rows.end(), 0);
  const auto q = in.q_rows(rows);
  const paged_kv kv = build_paged_kv(in, lengths, cfg.page_size, cfg.page_seed);
  // The reference reads the cache through its own gather: the paging must be transparent.
  const auto k = reference::gather_paged(c, lengths, kv.k_cache, kv.block_table, kv.pages_per_seq, kv.page_size);
  const auto v = reference::gather_paged(c, lengths, kv.v_cache, kv.block_table, kv.pages_per_seq, kv.page_size);
  return {flash_decode(c, lengths, kv, q, rows, cfg), reference::decode(c, lengths, q, rows, k, v)};
}

decode_config f64_cfg(std::int64_t splits, std::int64_t page, std::int64_t tile = 16) {
  decode_config cfg;
  cfg.splits = splits;
  cfg.page_size = page;
  cfg.tile_k = tile;
  for (std::string_view n : state_names()) set_state(cfg.states, n, format_id::m_f64);
  return cfg;
}

std::int64_t nan_count(const attention_output& o) {
  std::int64_t n = 0;
  for (double x : o.o) n += std::isnan(x);
  for (double x : o.lse) n += std::isnan(x);
  return n;
}

// Max relative error of O (over the max |O_ref|) and max abs LSE error; -inf must match.
std::pair<double, double> errors(const outputs& r) {
  double mo = 0, ro = 0, ml = 0;
  for (std::size_t i = 0; i < r.ref.o.size(); ++i) {
    mo = std::max(mo, std::isnan(r.kernel.o[i]) ? INFINITY : std::fabs(r.kernel.o[i] - r.ref.o[i]));
    ro = std::max(ro, std::fabs(r.ref.o[i]));
  }
  for (std::size_t i = 0; i < r.ref.lse.size(); ++i) {
    if (r.kernel.lse[i] == r.ref.lse[i]) continue;
    ml = std::max(ml, std::isnan(r.kernel.lse[i]) ? INFINITY : std::fabs(r.kernel.lse[i] - r.ref.lse[i]));
  }
  return {mo / std::max(ro, 1e-300), ml};
}

TEST(flash_decode, fp64_states_equal_the_reference_for_every_split_and_page) {
  // page 16: lengths 0, 1, 16, 17, 160 (= 0, 1 mod 16), 161, and T up to 8 with GQA 4:1.
  const attention_case c = make(6, 8, 161, 8, 2);
  const std::vector<std::int64_t> lengths{0, 1, 16, 17, 160, 161};
  for (std::int64_t splits : {1, 3, 7, 16})
    for (std::int64_t page : {1, 16, 64}) {
      const auto r = run(c, lengths, f64_cfg(splits, page));
      EXPECT_EQ(nan_count(r.kernel), 0) << "splits " << splits << " page " << page;
      const auto [eo, el] = errors(r);
      // Basis: the 1e-12 for an fp64 emulation.
      EXPECT_LE(eo, 1e-12) << "splits " << splits << " page " << page;
      EXPECT_LE(el, 1e-12) << "splits " << splits << " page " << page;
    }
}

TEST(flash_decode, empty_splits_and_all_empty_rows_are_defined_not_nan) {
  // 16 splits over 17 keys with 16-key tiles: 14 splits are empty; member 0 has no keys.
  const attention_case c = make(2, 4, 17);
  decode_config cfg;
  cfg.splits = 16;
  cfg.tile_k = 16;
  const auto r = run(c, {0, 17}, cfg);
  EXPECT_EQ(nan_count(r.kernel), 0);
  for (std::size_t i = 0; i < 4 * 4; ++i) EXPECT_EQ(r.kernel.lse[i], -INFINITY);
  for (std::size_t i = 0; i < 4 * 4 * 32; ++i) EXPECT_EQ(r.kernel.o[i], 0.0);
}

TEST(flash_decode, split_count_changes_rounding_only_within_a_bound) {
  const attention_case c = make(2, 2, 1000);
  decode_config cfg;
  cfg.tile_k = 32;
  double worst = 0;
  for (std::int64_t splits : {1, 2, 5, 32}) {
    cfg.splits = splits;
    worst = std::max(worst, errors(run(c, {1000, 999}, cfg)).first);
  }
  // Basis: bf16 P and output: a few bf16 unit roundoffs (2^-9 ~ 2e-3), whatever the splits.
  EXPECT_LT(worst, 4 * 0x1.0p-9);
}

TEST(flash_decode, merge_nan_empty_shows_only_on_rows_with_no_keys) {
  decode_config cfg;
  cfg.splits = 4;
  cfg.faults = {fault::m_merge_nan_empty};
  EXPECT_GT(nan_count(run(make(2, 1, 300), {0, 300}, cfg).kernel), 0);  // a member with 0 keys
  EXPECT_EQ(nan_count(run(make(1, 1, 300), {300}, cfg).kernel), 0);    // hidden otherwise
}

TEST(flash_decode, lse_base2_merge_breaks_the_lse_and_with_splits_the_output) {
  const attention_case c = make(1, 2, 512);
  decode_config cfg;
  cfg.tile_k = 32;
  cfg.splits = 1;
  const auto clean = errors(run(c, {512}, cfg));
  cfg.faults = {fault::m_lse_base2_merge};
  const auto one = errors(run(c, {512}, cfg));
  EXPECT_GT(one.second, 100 * std::max(clean.second, 1e-6));  // LSE wrong even with one split
  cfg.splits = 8;
  const auto many = errors(run(c, {512}, cfg));
  EXPECT_GT(many.first, 10 * clean.first);  // O wrong once several splits are merged
}

TEST(flash_decode, split_tail_drop_shows_at_lengths_off_the_tile) {
  decode_config cfg;
  cfg.tile_k = 32;
  cfg.splits = 3;
  const auto clean = errors(run(make(1, 1, 351), {351}, cfg));
  cfg.faults = {fault::m_split_tail_drop};
  const auto off = errors(run(make(1, 1, 351), {351}, cfg));  // last split [256, 351): 31 keys past its last full tile
  const auto on = errors(run(make(1, 1, 352), {352}, cfg));   // a multiple: nothing dropped
  EXPECT_GT(off.second, 10 * std::max(clean.second, 1e-4));
  EXPECT_LE(on.second, 2 * std::max(clean.second, 1e-4));
}

TEST(flash_decode, rejects_bad_settings) {
  decode_config cfg;
  cfg.faults = {fault::m_skip_rescale};
  EXPECT_THROW((void)run(make(1, 1, 64), {64}, cfg), error);
  cfg.faults.clear();
  cfg.split_size = 33;  // not a multiple of the 64-key tile
  EXPECT_THROW((void)run(make(1, 1, 64), {64}, cfg), error);
  cfg.split_size = 0;
  EXPECT_THROW((void)run(make(1, 9, 64), {64}, cfg), error);  // T > 8
}

}  // namespace
}  // namespace numprobe::emu
