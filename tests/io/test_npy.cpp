// .npy round trips and decoding, without python.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "io_test_util.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/load_tensor.hpp"
#include "numprobe/io/npy.hpp"

namespace numprobe::io {
namespace {

using test::scratch_dir;

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

TEST(npy, f64_round_trip_keeps_every_bit) {
  const auto dir = scratch_dir();
  const std::vector<double> v{0.0, -0.0, 1.0 / 3.0, std::numeric_limits<double>::denorm_min(),
                              -std::numeric_limits<double>::infinity(), 1e308};
  const std::vector<std::uint64_t> shape{2, 3};
  write_npy(dir / "a.npy", shape, v);
  const auto t = read_npy(dir / "a.npy");
  EXPECT_EQ(t.dtype, dtype::m_f64);
  EXPECT_EQ(t.shape, shape);
  const auto back = t.to_doubles();
  ASSERT_EQ(back.size(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(back[i]), std::bit_cast<std::uint64_t>(v[i])) << i;
  }
}

TEST(npy, header_is_padded_to_64_bytes_and_versioned_1) {
  const std::vector<float> v{1.5f, -2.0f, 3.25f};
  const std::vector<std::uint64_t> shape{3};
  const auto img = npy_bytes(shape, dtype::m_f32, bytes_of(v));
  EXPECT_EQ(std::to_integer<int>(img[6]), 1);
  const std::size_t hlen = std::to_integer<std::size_t>(img[8]) |
                           (std::to_integer<std::size_t>(img[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(img.size(), 10 + hlen + 12);
  const std::string header(reinterpret_cast<const char*>(img.data()) + 10, hlen);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': (3,)"), std::string::npos) << header;
  EXPECT_EQ(header.back(), '\n');
}

struct dtype_case {
  dtype type;
  std::vector<std::uint8_t> raw;   // little-endian element bytes
  std::vector<double> values;      // what they decode to
};

class npy_dtypes : public ::testing::TestWithParam<dtype_case> {};

TEST_P(npy_dtypes, round_trip_bytes_and_values) {
  const auto& c = GetParam();
  const auto dir = scratch_dir();
  const auto raw = std::as_bytes(std::span<const std::uint8_t>(c.raw));
  const std::vector<std::uint64_t> shape{c.values.size()};
  write_npy(dir / "t.npy", shape, c.type, raw);
  auto t = read_npy(dir / "t.npy");
  if (t.dtype == dtype::m_raw8 && c.type != dtype::m_raw8) t = t.reinterpret(c.type);
  EXPECT_EQ(t.dtype, c.type);
  EXPECT_EQ(t.shape, shape);
  ASSERT_EQ(t.bytes.size(), raw.size());
  EXPECT_EQ(std::memcmp(t.bytes.data(), raw.data(), raw.size()), 0);
  const auto got = t.to_doubles();
  ASSERT_EQ(got.size(), c.values.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(c.values[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else {
      EXPECT_EQ(got[i], c.values[i]) << i;
    }
  }
}

const double k_nan = std::numeric_limits<double>::quiet_NaN();

INSTANTIATE_TEST_SUITE_P(
    all, npy_dtypes,
    ::testing::Values(
        dtype_case{dtype::m_f32, {0, 0, 0xC0, 0x3F, 0, 0, 0x80, 0xFF}, {1.5, -HUGE_VAL}},
        dtype_case{dtype::m_f16, {0x00, 0x3C, 0xFF, 0x7B, 0x01, 0x00}, {1.0, 65504.0, 0x1p-24}},
        dtype_case{dtype::m_bf16, {0x80, 0x3F, 0x80, 0xC0, 0xC1, 0xFF}, {1.0, -4.0, k_nan}},
        dtype_case{dtype::m_i8, {0x80, 0x7F, 0xFF}, {-128, 127, -1}},
        dtype_case{dtype::m_u8, {0x80, 0x7F, 0xFF}, {128, 127, 255}},
        dtype_case{dtype::m_i16, {0x00, 0x80, 0xFF, 0x7F}, {-32768, 32767}},
        dtype_case{dtype::m_u16, {0x00, 0x80, 0xFF, 0xFF}, {32768, 65535}},
        dtype_case{dtype::m_i32, {0xFE, 0xFF, 0xFF, 0xFF}, {-2}},
        dtype_case{dtype::m_u32, {0xFE, 0xFF, 0xFF, 0xFF}, {4294967294.0}},
        dtype_case{dtype::m_i64, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, {-1}},
        dtype_case{dtype::m_u64, {0, 0, 0, 0, 0, 0, 0x10, 0}, {0x1p52}},
        dtype_case{dtype::m_bool, {0, 1, 2}, {0, 1, 1}},
        dtype_case{dtype::m_e4m3fn, {0x7E, 0x7F, 0x80, 0x01}, {448, k_nan, -0.0, 0x1p-9}},
        dtype_case{dtype::m_e5m2, {0x7B, 0x7C, 0x01}, {57344, HUGE_VAL, 0x1p-16}},
        dtype_case{dtype::m_e8m0, {0x7F, 0x00, 0xFF}, {1.0, 0x1p-127, k_nan}},
        dtype_case{dtype::m_e2m1, {0x07, 0x0F, 0x01}, {6.0, -6.0, 0.5}}),
    [](const auto& info) { return std::string(name(info.param.type)); });

TEST(npy, scalar_and_empty_shapes) {
  const auto dir = scratch_dir();
  const std::vector<double> one{42.0};
  write_npy(dir / "s.npy", std::vector<std::uint64_t>{}, one);
  const auto s = read_npy(dir / "s.npy");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.to_doubles(), one);
  write_npy(dir / "e.npy", std::vector<std::uint64_t>{4, 0, 3}, std::vector<float>{});
  const auto e = read_npy(dir / "e.npy");
  EXPECT_EQ(e.shape, (std::vector<std::uint64_t>{4, 0, 3}));
  EXPECT_EQ(e.element_count(), 0u);
  EXPECT_TRUE(e.to_doubles().empty());
}

TEST(npy, reads_version_2_and_3_headers_and_python2_longs) {
  const auto dir = scratch_dir();
  for (int major : {2, 3}) {
    auto img = test::npy_image("{'descr': '<i2', 'fortran_order': False, 'shape': (2L, 1), }\n",
                               major, 0);
    test::append_le(img, 7, 2);
    test::append_le(img, 0xFFF9, 2);
    const auto p = dir / ("v" + std::to_string(major) + ".npy");
    test::write_file(p, img);
    const auto t = read_npy(p);
    EXPECT_EQ(t.shape, (std::vector<std::uint64_t>{2, 1}));
    EXPECT_EQ(t.to_doubles(), (std::vector<double>{7, -7}));
  }
}

TEST(npy, writer_refuses_size_mismatch_and_packed_dtypes) {
  const auto dir = scratch_dir();
  const std::vector<float> v{1, 2, 3};
  test::expect_input_error(
      [&] { write_npy(dir / "x.npy", std::vector<std::uint64_t>{4}, v); }, "x.npy", "given 12");
  const std::vector<std::uint8_t> b{0x21};
  test::expect_input_error(
      [&] {
        write_npy(dir / "y.npy", std::vector<std::uint64_t>{2}, dtype::m_e2m1_packed,
                  std::as_bytes(std::span<const std::uint8_t>(b)));
      },
      "y.npy", "cannot be stored in .npy");
  EXPECT_FALSE(std::filesystem::exists(dir / "x.npy"));
}

TEST(npy, chunked_decode_matches_whole_decode) {
  const auto dir = scratch_dir();
  std::vector<float> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.37f - 100.0f;
  write_npy(dir / "c.npy", std::vector<std::uint64_t>{10, 100}, v);
  const auto t = read_npy(dir / "c.npy");
  std::vector<double> streamed(v.size(), -1.0);
  std::size_t calls = 0;
  t.for_each_chunk(64, [&](std::uint64_t first, std::span<const double> s) {
    ++calls;
    std::copy(s.begin(), s.end(), streamed.begin() + static_cast<std::ptrdiff_t>(first));
  });
  EXPECT_EQ(calls, 16u);  // ceil(1000 / 64)
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(streamed[i], double(v[i])) << i;
}

TEST(npy, raw8_needs_a_named_format) {
  const auto dir = scratch_dir();
  auto img = test::npy_image("{'descr': '<V1', 'fortran_order': False, 'shape': (1,), }\n", 1, 0);
  img.push_back(std::byte{0x7E});
  test::write_file(dir / "r.npy", img);
  const auto t = read_npy(dir / "r.npy");
  EXPECT_EQ(t.dtype, dtype::m_raw8);
  test::expect_input_error([&] { (void)t.to_doubles(); }, "r.npy", "name the format");
  EXPECT_EQ(load_tensor((dir / "r.npy").string() + "@e4m3fn").to_doubles(),
            std::vector<double>{448.0});
  test::expect_input_error([&] { (void)t.reinterpret(dtype::m_f16); }, "r.npy",
                           "storage widths differ");
}

}  // namespace
}  // namespace numprobe::io
