// The format table against NUMERICS.md's table, and name parsing. Expected values are the
// table's (each is 2^k or a short binary fraction, written out by hand from the layout).
#include <gtest/gtest.h>

#include <cmath>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"

namespace nf = numprobe::formats;
using nf::format_id;

namespace {

struct table_row {
  format_id id;
  double max_finite, min_normal, min_subnormal, lowest;
  bool has_inf;
};

// Hand-derived from each layout: max = (2 - 2^-m [fn: 2^(1-m)]) 2^(emax - bias).
const table_row k_rows[] = {
    {format_id::m_f32, 0x1.fffffep127, 0x1p-126, 0x1p-149, -0x1.fffffep127, true},
    {format_id::m_tf32, 0x1.ffcp127, 0x1p-126, 0x1p-136, -0x1.ffcp127, true},
    {format_id::m_bf16, 0x1.fep127, 0x1p-126, 0x1p-133, -0x1.fep127, true},
    {format_id::m_f16, 65504.0, 0x1p-14, 0x1p-24, -65504.0, true},
    {format_id::m_e4m3fn, 448.0, 0x1p-6, 0x1p-9, -448.0, false},
    {format_id::m_e4m3fnuz, 240.0, 0x1p-7, 0x1p-10, -240.0, false},
    {format_id::m_e5m2, 57344.0, 0x1p-14, 0x1p-16, -57344.0, true},
    {format_id::m_e5m2fnuz, 57344.0, 0x1p-15, 0x1p-17, -57344.0, false},
    {format_id::m_e3m2, 28.0, 0.25, 0.0625, -28.0, false},
    {format_id::m_e2m3, 7.5, 1.0, 0.125, -7.5, false},
    {format_id::m_e2m1, 6.0, 1.0, 0.5, -6.0, false},
    {format_id::m_e8m0, 0x1p127, 0x1p-127, 0.0, 0.0, false},
    {format_id::m_i8, 127.0, 1.0, 1.0, -128.0, false},
    {format_id::m_i4, 7.0, 1.0, 1.0, -8.0, false},
    {format_id::m_u4, 15.0, 1.0, 1.0, 0.0, false},
};

class format_table : public ::testing::TestWithParam<table_row> {};

TEST_P(format_table, matches_numerics_md) {
  const auto& r = GetParam();
  const auto& f = nf::info(r.id);
  EXPECT_EQ(f.id, r.id);
  EXPECT_EQ(f.max_finite, r.max_finite);
  EXPECT_EQ(f.min_normal, r.min_normal);
  EXPECT_EQ(f.min_subnormal, r.min_subnormal);
  EXPECT_EQ(f.lowest, r.lowest);
  EXPECT_EQ(f.has_inf, r.has_inf);
  // The table's max must be a value of the format, and the next step up must not be.
  EXPECT_EQ(nf::decode(r.id, nf::encode(r.id, r.max_finite)), r.max_finite);
}

INSTANTIATE_TEST_SUITE_P(all, format_table, ::testing::ValuesIn(k_rows),
                         [](const auto& info) { return std::string(nf::name(info.param.id)); });

TEST(format_table, lists_every_format_once_in_id_order) {
  const auto all = nf::all_formats();
  ASSERT_EQ(all.size(), 16u);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(static_cast<std::size_t>(all[i].id), i);
}

TEST(format_table, default_overflow_follows_ml_dtypes) {
  // ml_dtypes 0.6: e4m3fn/fnuz, e5m2fnuz and e8m0 overflow to NaN, e5m2 and the IEEE
  // formats to inf, fp6/fp4 saturate.
  EXPECT_EQ(nf::info(format_id::m_e4m3fn).default_overflow, nf::overflow::m_nan);
  EXPECT_EQ(nf::info(format_id::m_e4m3fnuz).default_overflow, nf::overflow::m_nan);
  EXPECT_EQ(nf::info(format_id::m_e5m2fnuz).default_overflow, nf::overflow::m_nan);
  EXPECT_EQ(nf::info(format_id::m_e8m0).default_overflow, nf::overflow::m_nan);
  EXPECT_EQ(nf::info(format_id::m_e5m2).default_overflow, nf::overflow::m_inf);
  EXPECT_EQ(nf::info(format_id::m_bf16).default_overflow, nf::overflow::m_inf);
  EXPECT_EQ(nf::info(format_id::m_e2m1).default_overflow, nf::overflow::m_saturate);
  EXPECT_EQ(nf::info(format_id::m_e3m2).default_overflow, nf::overflow::m_saturate);
}

TEST(format_table, special_codes) {
  auto s = nf::specials(format_id::m_e4m3fn);
  EXPECT_EQ(s.max_finite, 0x7Eu);
  EXPECT_FALSE(s.pos_inf.has_value());
  EXPECT_EQ(s.nan.value(), 0x7Fu);
  EXPECT_EQ(s.neg_nan.value(), 0xFFu);
  EXPECT_EQ(s.neg_zero.value(), 0x80u);
  s = nf::specials(format_id::m_e4m3fnuz);
  EXPECT_EQ(s.max_finite, 0x7Fu);
  EXPECT_EQ(s.nan.value(), 0x80u);
  EXPECT_FALSE(s.neg_zero.has_value());
  s = nf::specials(format_id::m_e5m2);
  EXPECT_EQ(s.max_finite, 0x7Bu);
  EXPECT_EQ(s.pos_inf.value(), 0x7Cu);
  EXPECT_EQ(s.neg_inf.value(), 0xFCu);
  EXPECT_EQ(s.nan.value(), 0x7Eu);
  s = nf::specials(format_id::m_e8m0);
  EXPECT_EQ(s.max_finite, 0xFEu);
  EXPECT_EQ(s.nan.value(), 0xFFu);
  EXPECT_FALSE(s.neg_zero.has_value());
  s = nf::specials(format_id::m_bf16);
  EXPECT_EQ(s.pos_inf.value(), 0x7F80u);
  EXPECT_EQ(s.nan.value(), 0x7FC0u);
  EXPECT_EQ(s.max_finite, 0x7F7Fu);
  s = nf::specials(format_id::m_e2m1);
  EXPECT_FALSE(s.nan.has_value());
  EXPECT_EQ(s.max_finite, 0x7u);
  EXPECT_EQ(s.neg_zero.value(), 0x8u);
}

TEST(format_table, parses_names_and_aliases) {
  EXPECT_EQ(nf::parse_format("float8_e4m3fn"), format_id::m_e4m3fn);
  EXPECT_EQ(nf::parse_format("BF16"), format_id::m_bf16);
  EXPECT_EQ(nf::parse_format("fp4"), format_id::m_e2m1);
  EXPECT_EQ(nf::parse_format("float6_e3m2fn"), format_id::m_e3m2);
  EXPECT_EQ(nf::parse_format("float8_e8m0fnu"), format_id::m_e8m0);
  EXPECT_EQ(nf::parse_format("e5m2fnuz"), format_id::m_e5m2fnuz);
  for (const auto& f : nf::all_formats()) EXPECT_EQ(nf::parse_format(f.name), f.id);
}

TEST(format_table, unknown_name_is_an_input_error_naming_it) {
  try {
    (void)nf::parse_format("e9m9", "--format");
    FAIL() << "no error";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("e9m9"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--format"), std::string::npos);
  }
}

TEST(format_table, f64_has_no_32_bit_code) {
  EXPECT_THROW((void)nf::encode(format_id::m_f64, 1.0), numprobe::error);
  EXPECT_THROW((void)nf::decode(format_id::m_f64, 0), numprobe::error);
}

}  // namespace
