// safetensors_stream: a file written tensor by tensor is the file write_safetensors writes from
// the same tensors (byte for byte), reads back through safetensors_file, and is never left half
// written: an unfinished or over-long stream leaves no file behind.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/io/safetensors.hpp"
#include "tests/io/io_test_util.hpp"

namespace numprobe::io::test {
namespace {

std::vector<char> file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(safetensors_stream, equals_write_safetensors_and_reads_back) {
  const auto dir = scratch_dir();
  std::mt19937_64 g(3);
  std::vector<float> a(37 * 5);
  for (auto& v : a) v = std::normal_distribution<float>(0.f, 1.f)(g);
  std::vector<std::uint8_t> b(130);
  for (auto& v : b) v = static_cast<std::uint8_t>(g());
  std::vector<double> c(3, 0.25);
  const std::map<std::string, std::string> meta{{"format", "pt"}};
  write_safetensors(dir / "whole.safetensors",
                    {tensor_of("w.a", {37, 5}, a), tensor_of("w.b", {130}, b), tensor_of("w.c", {3}, c)}, meta);
  safetensors_stream s(dir / "stream.safetensors",
                       {{"w.b", dtype::m_u8, {130}}, {"w.a", dtype::m_f32, {37, 5}}, {"w.c", dtype::m_f64, {3}}},
                       meta);
  ASSERT_EQ(s.order().size(), 3u);
  EXPECT_EQ(s.order()[0].name, "w.c");  // widest first, then by name
  EXPECT_EQ(s.order()[2].name, "w.b");
  const auto cb = std::as_bytes(std::span<const double>(c));
  const auto ab = std::as_bytes(std::span<const float>(a));
  const auto bb = std::as_bytes(std::span<const std::uint8_t>(b));
  s.write(cb);
  s.write(ab.subspan(0, 11));  // a split inside a tensor
  s.write(ab.subspan(11));
  s.write(bb);
  EXPECT_FALSE(std::filesystem::exists(dir / "stream.safetensors"));  // not before finish
  s.finish();
  EXPECT_EQ(file_bytes(dir / "stream.safetensors"), file_bytes(dir / "whole.safetensors"));
  const auto f = safetensors_file::open(dir / "stream.safetensors");
  EXPECT_EQ(f.at("w.a").to_doubles()[7], static_cast<double>(a[7]));
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(safetensors_stream, unfinished_short_and_long_streams_leave_no_file) {
  const auto dir = scratch_dir();
  const std::vector<std::uint8_t> bytes(16, 7);
  {
    safetensors_stream s(dir / "x.safetensors", {{"t", dtype::m_u8, {16}}});
    s.write(std::as_bytes(std::span<const std::uint8_t>(bytes)).subspan(0, 8));
  }  // destroyed before finish
  {
    safetensors_stream s(dir / "y.safetensors", {{"t", dtype::m_u8, {16}}});
    s.write(std::as_bytes(std::span<const std::uint8_t>(bytes)).subspan(0, 8));
    EXPECT_THROW(s.finish(), numprobe::error);
  }
  {
    safetensors_stream s(dir / "z.safetensors", {{"t", dtype::m_u8, {8}}});
    EXPECT_THROW(s.write(std::as_bytes(std::span<const std::uint8_t>(bytes))), numprobe::error);
  }
  EXPECT_THROW(safetensors_stream(dir / "d.safetensors", {{"t", dtype::m_u8, {1}}, {"t", dtype::m_u8, {1}}}),
               numprobe::error);
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++left;
  EXPECT_EQ(left, 0u);
}

}  // namespace
}  // namespace numprobe::io::test
