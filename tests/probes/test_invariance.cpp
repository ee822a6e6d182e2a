// invariance (issue 30): which check catches which emulator fault, and the pieces it is built of.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "probes/invariance/invariance_probe.hpp"
#include "src/kernels/emu/flash_decode.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::probes {
namespace {

// Small enough to run every check in about a second, large enough to cross tiles: with 32x32
// tiles S = 65 is three key tiles; batches of 64 sequences of 2 heads fill FA2's heuristic's 264
// slots past half, so its split count changes with the batch (3 alone, 2 among 64).
invariance_options small_options(const std::string& fault) {
  invariance_options o;
  o.base.seq = 65;
  o.base.heads = 2;
  o.base.kv_heads = 1;
  o.base.head_dim = 16;
  o.base.mask = mask_kind::m_causal;
  o.base.seed = 11;
  o.provider.backend = "emu";
  o.provider.tile = tile_shape{32, 32};
  if (!fault.empty()) o.provider.faults = {fault};
  o.batch_sizes = {1, 2, 64};
  o.repeats = 3;
  return o;
}

struct fault_param {
  std::string fault;   // "" for the healthy emulator
  std::string caught;  // the one check that is not invariant ("" for none)
  friend void PrintTo(const fault_param& p, std::ostream* os) { *os << (p.fault.empty() ? "healthy" : p.fault); }
};

class invariance_faults : public ::testing::TestWithParam<fault_param> {};

TEST_P(invariance_faults, caught_by_its_check_only) {
  const fault_param& prm = GetParam();
  const invariance_result r = run_invariance(small_options(prm.fault));
  ASSERT_EQ(r.checks.size(), 5u);
  for (const auto& c : r.checks) {
    SCOPED_TRACE(c.name);
    EXPECT_NE(c.verdict, invariance_verdict::m_not_applicable) << c.reason;
    EXPECT_GT(c.bits.compared, 0);
    if (c.name == prm.caught) {
      EXPECT_GT(c.bits.differing, 0);
      // Each fault changes rounding only (another order, a restart merged exactly, another split
      // count): a determinism finding, not an accuracy one.
      EXPECT_EQ(c.verdict, invariance_verdict::m_within_bound) << c.reason;
      EXPECT_GE(c.bits.first.row, 0);
      EXPECT_GT(c.bits.max_ulp, 0.0);
      ASSERT_EQ(c.cases.size(), 2u);
      EXPECT_NE(c.cases[0], "");
    } else {
      EXPECT_EQ(c.verdict, invariance_verdict::m_invariant) << c.bits.differing << " differ, first at row "
                                                            << c.bits.first.row;
      EXPECT_EQ(c.bits.differing, 0);
    }
  }
  EXPECT_EQ(invariance_exit_code(r, {}), 0);  // within-bound is a finding, not a failure
  if (!prm.caught.empty()) {
    EXPECT_EQ(invariance_exit_code(r, {prm.caught}), 1);  // --require makes the finding fail
  }
}

INSTANTIATE_TEST_SUITE_P(emu, invariance_faults,
                         ::testing::Values(fault_param{"", ""}, fault_param{"atomic-order", "repeat"},
                                           fault_param{"split-heuristic", "splits"},
                                           fault_param{"decode-path", "decode"},
                                           fault_param{"chunk-rescale", "chunk"}),
                         [](const auto& info) {
                           std::string n = info.param.fault.empty() ? "healthy" : info.param.fault;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(invariance_breaks, a_side_over_the_bound_breaks) {
  // Scores that rise key after key make skip-rescale wrong when the tiles are walked in order
  // (the prefill), and nearly right in reverse (decode-path's T = 1 call sees the max first):
  // the bits differ and the prefill side exceeds the accuracy bound.
  invariance_options o = small_options("");
  o.provider.faults = {"decode-path", "skip-rescale"};
  o.base.dist = input_dist::m_rescale_stress;
  o.checks = {"decode"};
  const invariance_result r = run_invariance(o);
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].verdict, invariance_verdict::m_breaks) << r.checks[0].bits.differing;
  EXPECT_FALSE(r.checks[0].out_of_bound.empty());
  EXPECT_EQ(invariance_exit_code(r, {}), 1);
}

TEST(invariance_options_check, unknown_check_is_an_input_error) {
  invariance_options o = small_options("");
  o.checks = {"repeat", "batchh"};
  EXPECT_THROW((void)run_invariance(o), error);
}

TEST(invariance_not_applicable, splits_on_the_reference_backend) {
  invariance_options o = small_options("");
  o.provider.backend = "ref";
  o.checks = {"splits"};
  const invariance_result r = run_invariance(o);
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].verdict, invariance_verdict::m_not_applicable);
  EXPECT_NE(r.checks[0].reason.find("ref"), std::string::npos);
}

TEST(concatenate_batch, member_j_is_the_sequence_bit_for_bit) {
  attention_case c = small_options("").base;
  c.queries = 5;
  c.head_dim = 8;
  const attention_inputs a(c);
  attention_case c2 = c;
  c2.seed = 99;
  const attention_inputs b(c2);
  const attention_inputs* members[] = {&b, &a, &b};
  const attention_inputs batch = concatenate_batch(members);
  EXPECT_EQ(batch.c().batch, 3);
  const std::vector<std::int64_t> rows_a{0, 1, 2, 3, 4}, rows_in_batch{5, 6, 7, 8, 9};
  EXPECT_EQ(a.q_rows(rows_a), batch.q_rows(rows_in_batch));
  const auto kv = static_cast<std::size_t>(c.seq * c.kv_heads * c.head_dim);
  for (std::size_t i = 0; i < kv; ++i) {
    EXPECT_EQ(a.k()[i], batch.k()[kv + i]);
    EXPECT_EQ(a.v()[i], batch.v()[kv + i]);
    EXPECT_EQ(b.k()[i], batch.k()[2 * kv + i]);
  }
  attention_case other = c;
  other.head_dim = 16;
  const attention_inputs d(other);
  const attention_inputs* bad[] = {&a, &d};
  EXPECT_THROW((void)concatenate_batch(bad), error);
}

// A ragged batch (issue 30): member j's keys are its own, bit for bit, in the first S_j of Smax
// slots; the padding is no copy of them and no zero; the id carries the lengths.
TEST(concatenate_ragged, members_keep_their_keys_and_padding_is_loud) {
  attention_case c = small_options("").base;
  c.queries = 4;
  c.head_dim = 8;
  attention_case longer = c;
  longer.seq = 97;
  longer.seed = 5;
  const attention_inputs a(c), b(longer);
  const attention_inputs* members[] = {&a, &b};
  const attention_inputs batch = concatenate_ragged(members);
  ASSERT_EQ(batch.c().batch, 2);
  EXPECT_EQ(batch.c().seq, 97);
  EXPECT_EQ(batch.c().seq_lens, (std::vector<std::int64_t>{65, 97}));
  EXPECT_NE(batch.c().id().find("lens=65/97"), std::string::npos) << batch.c().id();
  EXPECT_EQ(parse_attention_case(batch.c().id()).seq_lens, batch.c().seq_lens);
  const std::vector<std::int64_t> first{0, 1, 2, 3}, second{4, 5, 6, 7};
  EXPECT_EQ(a.q_rows(first), batch.q_rows(first));
  EXPECT_EQ(b.q_rows(first), batch.q_rows(second));
  const auto row = static_cast<std::size_t>(c.kv_heads * c.head_dim);
  for (std::size_t i = 0; i < 65 * row; ++i) ASSERT_EQ(a.k()[i], batch.k()[i]);
  std::size_t loud = 0;
  for (std::size_t i = 65 * row; i < 97 * row; ++i) loud += std::abs(batch.v()[i]) >= 8.0 ? 1 : 0;
  EXPECT_EQ(loud, 32 * row);  // V padding is 16 + a value of |x| < 8: never near the real values
  for (std::size_t i = 0; i < 97 * row; ++i) ASSERT_EQ(b.k()[i], batch.k()[97 * row + i]);
  attention_case other_t = c;
  other_t.queries = 5;
  const attention_inputs d(other_t);
  const attention_inputs* bad[] = {&a, &d};
  EXPECT_THROW((void)concatenate_ragged(bad), error);
}

TEST(ragged_case, lengths_are_checked) {
  attention_case c = small_options("").base;
  c.batch = 2;
  c.seq_lens = {65, 30};
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(case_key_range(c, 1, c.t() - 1).end, 30);  // the member's last query sees its 30 keys
  c.seq_lens = {65};
  EXPECT_THROW(c.validate(), error);
  c.seq_lens = {65, 66};
  EXPECT_THROW(c.validate(), error);
  c.seq_lens = {65, 0};
  EXPECT_THROW(c.validate(), error);
  c.seq_lens = {65, 30};
  c.mask = mask_kind::m_causal_top_left;
  EXPECT_THROW(c.validate(), error);
  EXPECT_THROW((void)parse_attention_case("attention(B=2,T=4,S=65,Hq=2,Hkv=1,D=8,in=bf16,mask=causal,lens=65/,seed=1)"),
               error);
}

// The emulator's member of a ragged batch is the sequence alone, bit for bit; the reference's is
// within its own error (1e-12 relative, DESIGN.md) of the sequence alone: padding is never read.
TEST(ragged_case, a_member_is_the_sequence_alone) {
  attention_case c = small_options("").base;
  c.queries = 0;
  attention_case longer = c;
  longer.seq = 130;
  longer.queries = 65;
  longer.seed = 3;
  const attention_inputs a(c), b(longer);
  const attention_inputs* members[] = {&b, &a};
  const attention_inputs batch = concatenate_ragged(members);
  std::vector<std::int64_t> rows_a(65), rows_batch(65);
  for (std::int64_t t = 0; t < 65; ++t) {
    rows_a[static_cast<std::size_t>(t)] = t;
    rows_batch[static_cast<std::size_t>(t)] = 65 + t;
  }
  for (const char* backend : {"emu", "ref"}) {
    SCOPED_TRACE(backend);
    provider_options po;
    po.backend = backend;
    if (std::string(backend) == "emu") po.tile = tile_shape{32, 32};
    auto alone = make_attention_provider(po);
    auto in_batch = make_attention_provider(po);
    const attention_output x = alone->run(a, rows_a), y = in_batch->run(batch, rows_batch);
    ASSERT_EQ(x.o.size(), y.o.size());
    for (std::size_t i = 0; i < x.o.size(); ++i) {
      if (std::string(backend) == "emu") ASSERT_EQ(x.o[i], y.o[i]) << i;
      else ASSERT_NEAR(x.o[i], y.o[i], 1e-12 * std::max(1.0, std::abs(x.o[i]))) << i;
    }
  }
}

// A backend that takes one length per call never sees a ragged batch: the provider wrapper
// refuses it (unsupported_case) unless the user says the kernel reads seq_lens.
TEST(ragged_case, refused_by_a_backend_that_does_not_take_it) {
  attention_case c = small_options("").base;
  const attention_inputs a(c);
  const attention_inputs* members[] = {&a, &a};
  const attention_inputs batch = concatenate_ragged(members);
  provider_options po;
  po.backend = "exec:true {in} {out}";
  auto prov = make_attention_provider(po);
  EXPECT_FALSE(prov->takes_ragged());
  const std::vector<std::int64_t> rows{0};
  EXPECT_THROW((void)prov->run(batch, rows), unsupported_case);
  po.ragged = true;  // said to read seq_lens: it runs (and `true` writes no output: a backend error)
  auto declared = make_attention_provider(po);
  EXPECT_TRUE(declared->takes_ragged());
  try {
    (void)declared->run(batch, rows);
    ADD_FAILURE() << "no output, no error";
  } catch (const unsupported_case&) {
    ADD_FAILURE() << "refused although declared";
  } catch (const error&) {
  }
}

TEST(bit_comparison, ulps_of_the_output_dtype) {
  using formats::format_id;
  EXPECT_EQ(ulp_distance(format_id::m_bf16, 1.0, 1.0 + 0x1p-7), 1.0);
  EXPECT_EQ(ulp_distance(format_id::m_bf16, 1.0, 1.0 - 0x1p-8), 1.0);  // across a binade
  EXPECT_EQ(ulp_distance(format_id::m_f16, 1.0, 1.0 + 3 * 0x1p-10), 3.0);
  EXPECT_EQ(ulp_distance(format_id::m_f16, -0x1p-24, 0x1p-24), 2.0);  // subnormals
  EXPECT_EQ(ulp_distance(format_id::m_f32, 2.0, 2.0 + 0x1p-22), 1.0);
  EXPECT_TRUE(std::isinf(ulp_distance(format_id::m_bf16, NAN, 1.0)));
  const std::vector<double> a{1.0, 2.0, 3.0, 4.0}, b{1.0, 2.0, 3.0 + 0x1p-6, 4.0 + 0x1p-4};
  const std::vector<std::int64_t> pos{7, 8};
  const bit_comparison c = compare_bits(format_id::m_bf16, a, b, pos, 1, 2);
  EXPECT_EQ(c.compared, 4);
  EXPECT_EQ(c.differing, 2);
  EXPECT_EQ(c.first.row, 8);
  EXPECT_EQ(c.first.dim, 0);
  EXPECT_EQ(c.max_ulp, 2.0);
  EXPECT_EQ(c.histogram_json(), (nlohmann::json{{"1", 1}, {"2", 1}}));
  const std::vector<double> z1{0.0}, z2{-0.0};
  const std::vector<std::int64_t> p0{0};
  EXPECT_EQ(compare_bits(format_id::m_bf16, z1, z2, p0, 1, 1).histogram_json(), (nlohmann::json{{"0", 1}}));
}

TEST(fa2_num_splits, follows_flash_attention_2) {
  // batch x heads x query blocks against 2 x 132 slots (flash_api.cpp doubles the SMs).
  EXPECT_EQ(emu::fa2_num_splits(2, 264, 3, 128), 3);    // 1 sequence of 2 heads: every key block
  EXPECT_EQ(emu::fa2_num_splits(128, 264, 3, 128), 2);  // 64 sequences: 2 splits fill 97%
  EXPECT_EQ(emu::fa2_num_splits(256, 264, 3, 128), 1);  // almost full: one split
}

}  // namespace
}  // namespace numprobe::probes
