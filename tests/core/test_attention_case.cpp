// Case ids round-trip, masks follow NUMERICS.md's definitions, inputs regenerate alone.
#include <gtest/gtest.h>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/base/error.hpp"

using namespace numprobe;

TEST(attention_case, id_round_trips_through_the_parser) {
  attention_case c;
  c.batch = 2;
  c.queries = 3;
  c.seq = 4097;
  c.heads = 28;
  c.kv_heads = 4;
  c.head_dim = 96;
  c.dtype = formats::format_id::m_f16;
  c.mask = mask_kind::m_window;
  c.window = 512;
  c.softcap = 30;
  c.scale = 0.125;
  c.dist = input_dist::m_shifted;
  c.logit_shift = -1e5;
  c.seed = 99;
  const std::string id = c.id();
  EXPECT_EQ(id,
            "attention(B=2,T=3,S=4097,Hq=28,Hkv=4,D=96,in=f16,mask=window,W=512,scale=0.125,"
            "softcap=30,dist=shifted,shift=-100000,seed=99)");
  EXPECT_EQ(parse_attention_case(id).id(), id);
}

TEST(attention_case, parser_rejects_unknown_and_malformed_fields) {
  EXPECT_THROW((void)parse_attention_case("attention(T=1,S=2,X=3)"), numprobe::error);
  EXPECT_THROW((void)parse_attention_case("attention(T=1,S=two)"), numprobe::error);
  EXPECT_THROW((void)parse_attention_case("softmax(T=1)"), numprobe::error);
  EXPECT_THROW((void)parse_attention_case("attention(T=1,S=2,Hq=3,Hkv=2)"), numprobe::error);
}

TEST(case_key_range, causal_alignments_and_window_follow_the_definitions) {
  attention_case c;
  c.queries = 3;
  c.seq = 128;
  c.mask = mask_kind::m_causal;
  // Bottom-right: query i sits at S - T + i and sees keys 0..S-T+i.
  EXPECT_EQ(case_key_range(c, 0), (key_range{0, 126}));
  EXPECT_EQ(case_key_range(c, 2), (key_range{0, 128}));
  c.mask = mask_kind::m_causal_top_left;  // keys j <= i
  EXPECT_EQ(case_key_range(c, 0), (key_range{0, 1}));
  c.mask = mask_kind::m_window;  // keys in (pos - W, pos]
  c.window = 10;
  EXPECT_EQ(case_key_range(c, 2), (key_range{118, 128}));
  c.queries = 200;  // T > S: the first T - S rows see nothing under bottom-right causal
  c.mask = mask_kind::m_causal;
  EXPECT_EQ(case_key_range(c, 0).size(), 0);
  EXPECT_EQ(case_key_range(c, 72), (key_range{0, 1}));
}

TEST(attention_inputs, values_are_rounded_to_the_dtype_and_deterministic) {
  attention_case c;
  c.seq = 37;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.seed = 5;
  const attention_inputs a(c), b(c);
  ASSERT_EQ(a.k().size(), 37u * 2 * 16);
  for (std::size_t i = 0; i < a.k().size(); ++i) {
    EXPECT_EQ(a.k()[i], b.k()[i]);
    EXPECT_EQ(a.k()[i], formats::round_to(formats::format_id::m_bf16, a.k_exact()[i]));
  }
  // Not constant, not zero: seeded random data.
  EXPECT_NE(a.k()[0], a.k()[1]);
  EXPECT_NE(a.v()[3], 0.0);
}

TEST(attention_inputs, a_row_regenerates_alone_and_short_cases_are_prefixes_of_long_ones) {
  attention_case c;
  c.batch = 2;
  c.seq = 300;
  c.heads = 4;
  c.kv_heads = 1;
  c.head_dim = 8;
  c.dist = input_dist::m_rescale_stress;
  const attention_inputs full(c);
  const std::vector<std::int64_t> rows{517};
  const auto all = full.q_all();
  const auto one = full.q_rows(rows);
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], all[517 * 32 + i]);

  attention_case s = c;
  s.seq = 129;
  const attention_inputs fresh(s), prefix(s, full);
  ASSERT_EQ(fresh.k().size(), prefix.k().size());
  for (std::size_t i = 0; i < fresh.k().size(); ++i) {
    ASSERT_EQ(fresh.k()[i], prefix.k()[i]) << i;
    ASSERT_EQ(fresh.v_exact()[i], prefix.v_exact()[i]) << i;
  }
  attention_case other = s;
  other.seed = 8;
  EXPECT_THROW((void)attention_inputs(other, full), numprobe::error);
}

TEST(attention_inputs, shifted_family_moves_every_logit_by_the_same_constant) {
  attention_case c;
  c.seq = 16;
  c.heads = 1;
  c.kv_heads = 1;
  c.head_dim = 8;
  c.dtype = formats::format_id::m_f64;
  c.dist = input_dist::m_shifted;
  c.logit_shift = -1000;
  const attention_inputs in(c);
  const auto q = in.q_rows(std::vector<std::int64_t>{0});
  // Channel 0 carries the shift: q0 * k0 * scale = -1000 exactly (f64 inputs).
  EXPECT_NEAR(q[0] * in.k()[0] * c.softmax_scale(), -1000.0, 1e-9);
  EXPECT_EQ(in.k()[0], in.k()[8]);
}
