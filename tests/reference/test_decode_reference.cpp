// The decode reference: double against cpp_bin_float_50 (1e-12), and equal to the attention
// reference when every member holds S keys (decode is bottom-right causal attention).
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/reference/attention.hpp"
#include "reference/decode_impl.hpp"

namespace numprobe::test {
namespace {

using mp50 = boost::multiprecision::cpp_bin_float_50;

attention_case decode_case(std::int64_t b, std::int64_t t, std::int64_t s, std::int64_t hq, std::int64_t hkv) {
  attention_case c;
  c.batch = b;
  c.queries = t;
  c.seq = s;
  c.heads = hq;
  c.kv_heads = hkv;
  c.head_dim = 32;
  c.mask = mask_kind::m_causal;
  c.seed = 13;
  return c;
}

std::vector<std::int64_t> all_rows(const attention_case& c) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(c.rows()));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

TEST(decode_reference, double_within_1e_12_of_multiprecision_with_ragged_lengths) {
  const attention_case c = decode_case(4, 5, 300, 4, 2);
  const std::vector<std::int64_t> lengths{300, 0, 3, 257};  // full, empty, shorter than T, ragged
  const attention_inputs in(c, false);
  const auto rows = all_rows(c);
  const auto q = in.q_rows(rows);
  const auto exact = reference::decode_generic<mp50>(c, lengths, q, rows, in.k(), in.v());
  const auto fast = reference::decode(c, lengths, q, rows, in.k(), in.v());
  // Basis: DESIGN.md's 1e-12 relative bound for the double reference.
  for (std::size_t i = 0; i < fast.lse.size(); ++i) {
    if (std::isinf(exact.lse[i])) {
      EXPECT_EQ(fast.lse[i], exact.lse[i]);
      continue;
    }
    EXPECT_LE(std::fabs(fast.lse[i] - exact.lse[i]) / std::max(1.0, std::fabs(exact.lse[i])), 1e-12);
  }
  double num = 0, den = 0;
  for (std::size_t i = 0; i < fast.o.size(); ++i) {
    ASSERT_FALSE(std::isnan(fast.o[i]));
    num = std::max(num, std::fabs(fast.o[i] - exact.o[i]));
    den = std::max(den, std::fabs(exact.o[i]));
  }
  EXPECT_LE(num / den, 1e-12);
  // Member 1 (no keys): every row O = 0, LSE = -inf. Member 2 (3 keys, T = 5): queries 0 and 1
  // sit at positions -2 and -1 and see nothing.
  for (std::int64_t t = 0; t < 5; ++t)
    for (std::int64_t h = 0; h < 4; ++h) EXPECT_EQ(fast.lse[static_cast<std::size_t>((5 + t) * 4 + h)], -INFINITY);
  EXPECT_EQ(fast.lse[static_cast<std::size_t>((10 + 0) * 4)], -INFINITY);
  EXPECT_EQ(fast.lse[static_cast<std::size_t>((10 + 1) * 4)], -INFINITY);
  EXPECT_TRUE(std::isfinite(fast.lse[static_cast<std::size_t>((10 + 2) * 4)]));
}

TEST(decode_reference, equals_bottom_right_attention_when_members_are_full) {
  const attention_case c = decode_case(2, 8, 200, 8, 2);
  const attention_inputs in(c, false);
  const auto rows = all_rows(c);
  const auto q = in.q_rows(rows);
  const std::vector<std::int64_t> lengths{200, 200};
  const auto dec = reference::decode(c, lengths, q, rows, in.k(), in.v());
  const auto att = reference::attention(c, q, rows, in.k(), in.v());
  for (std::size_t i = 0; i < dec.o.size(); ++i) EXPECT_NEAR(dec.o[i], att.o[i], 1e-13);
  for (std::size_t i = 0; i < dec.lse.size(); ++i) EXPECT_NEAR(dec.lse[i], att.lse[i], 1e-12);
}

}  // namespace
}  // namespace numprobe::test
