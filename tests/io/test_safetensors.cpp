// .safetensors write/read round trips, sub-byte packing, sharded checkpoints and the
// PATH[:TENSOR] loader.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "io_test_util.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/checkpoint.hpp"
#include "numprobe/io/load_tensor.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/io/safetensors.hpp"

namespace numprobe::io {
namespace {

namespace fs = std::filesystem;
using test::expect_input_error;
using test::scratch_dir;

std::span<const std::byte> raw(const std::vector<std::uint8_t>& v) {
  return std::as_bytes(std::span<const std::uint8_t>(v));
}

TEST(safetensors, round_trip_with_metadata_and_every_dtype_string) {
  const auto dir = scratch_dir();
  const std::vector<double> d{1.0 / 3.0, -2.5};
  const std::vector<float> f{0.1f, 7.0f, -0.0f};
  const std::vector<std::uint8_t> bytes8{0x7E, 0x00, 0x81, 0xFF};
  const std::vector<std::uint8_t> bytes16{0x80, 0x3F, 0x00, 0x3C};
  const std::vector<std::uint8_t> bytes64(8, 0x01);
  const std::vector<std::uint8_t> bytes6{0x01, 0x3F, 0x20, 0x15, 0xAA, 0x55};  // 8 fp6 codes
  std::vector<tensor_to_write> ts{tensor_of("d", {2}, d), tensor_of("f", {3, 1}, f),
                                  tensor_of("u8", {2, 2}, bytes8)};
  const std::vector<std::pair<dtype, const std::vector<std::uint8_t>*>> more{
      {dtype::m_bf16, &bytes16},     {dtype::m_f16, &bytes16},      {dtype::m_i16, &bytes16},
      {dtype::m_u16, &bytes16},      {dtype::m_i32, &bytes8},       {dtype::m_u32, &bytes8},
      {dtype::m_i64, &bytes64},      {dtype::m_u64, &bytes64},      {dtype::m_i8, &bytes8},
      {dtype::m_bool, &bytes8},      {dtype::m_e4m3fn, &bytes8},    {dtype::m_e5m2, &bytes8},
      {dtype::m_e8m0, &bytes8},      {dtype::m_e4m3fnuz, &bytes8},  {dtype::m_e5m2fnuz, &bytes8},
      {dtype::m_e2m3_packed, &bytes6}, {dtype::m_e3m2_packed, &bytes6},
      {dtype::m_e2m1_packed, &bytes8}};
  for (const auto& [type, b] : more) {
    const std::uint64_t n = b->size() * 8 / static_cast<std::uint64_t>(bits(type));
    ts.push_back({std::string(info(type).safetensors), type, {n}, raw(*b)});
  }
  const std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "ünïcode"}};
  write_safetensors(dir / "m.safetensors", ts, meta);

  // No temporary file is left next to the target.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);

  const auto f2 = safetensors_file::open(dir / "m.safetensors");
  EXPECT_EQ(f2.metadata(), meta);
  ASSERT_EQ(f2.tensors().size(), ts.size());
  for (const auto& t : ts) {
    const auto& v = f2.at(t.name);
    EXPECT_EQ(v.dtype, t.dtype) << t.name;
    EXPECT_EQ(v.shape, t.shape) << t.name;
    ASSERT_EQ(v.bytes.size(), t.bytes.size()) << t.name;
    EXPECT_EQ(std::memcmp(v.bytes.data(), t.bytes.data(), t.bytes.size()), 0) << t.name;
    // Wide types stay aligned to their width inside the mapped file.
    const auto width = static_cast<std::uintptr_t>(std::max(1, bits(t.dtype) / 8));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.bytes.data()) % width, 0u) << t.name;
  }
  EXPECT_EQ(f2.at("d").to_doubles(), d);
  EXPECT_EQ(f2.at("f").to_doubles(), (std::vector<double>{0.1f, 7.0f, -0.0f}));
  EXPECT_EQ(f2.at("BF16").to_doubles(), (std::vector<double>{1.0, 0.0078125}));
  expect_input_error([&] { (void)f2.at("nope"); }, "m.safetensors", "no tensor named 'nope'");
}

TEST(safetensors, f4_low_nibble_first_and_f6_lsb_first_bit_stream) {
  using formats::decode;
  using formats::format_id;
  // F4: byte 0x71 holds element 0 = 0x1 (0.5) and element 1 = 0x7 (6).
  const std::vector<std::uint8_t> f4{0x71, 0xF9};
  tensor_view v;
  v.dtype = dtype::m_e2m1_packed;
  v.shape = {4};
  v.bytes = raw(f4);
  EXPECT_EQ(v.to_doubles(), (std::vector<double>{0.5, 6.0, -0.5, -6.0}));
  // F6: codes c0..c3 packed LSB first into 3 bytes.
  const std::uint32_t c[4] = {0x01, 0x3F, 0x20, 0x15};
  const std::uint32_t stream = c[0] | (c[1] << 6) | (c[2] << 12) | (c[3] << 18);
  const std::vector<std::uint8_t> f6{std::uint8_t(stream), std::uint8_t(stream >> 8),
                                     std::uint8_t(stream >> 16)};
  for (auto [type, fmt] : {std::pair{dtype::m_e2m3_packed, format_id::m_e2m3},
                           std::pair{dtype::m_e3m2_packed, format_id::m_e3m2}}) {
    v.dtype = type;
    v.bytes = raw(f6);
    const auto got = v.to_doubles();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], decode(fmt, c[i])) << name(type) << " " << i;
  }
}

TEST(safetensors, writer_refuses_bad_input) {
  const auto dir = scratch_dir();
  const std::vector<float> f{1, 2};
  expect_input_error(
      [&] { write_safetensors(dir / "a.safetensors", {tensor_of("x", {2}, f), tensor_of("x", {2}, f)}); },
      "a.safetensors:x", "duplicate tensor name");
  expect_input_error([&] { write_safetensors(dir / "b.safetensors", {tensor_of("x", {3}, f)}); },
                     "b.safetensors:x", "given 8");
  expect_input_error(
      [&] { write_safetensors(dir / "c.safetensors", {tensor_of("__metadata__", {2}, f)}); },
      "c.safetensors", "reserved");
  const std::vector<std::uint8_t> b{1};
  expect_input_error(
      [&] { write_safetensors(dir / "d.safetensors", {{"r", dtype::m_raw8, {1}, raw(b)}}); },
      "d.safetensors:r", "no safetensors name");
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(safetensors, empty_file_round_trip) {
  const auto dir = scratch_dir();
  write_safetensors(dir / "e.safetensors", {});
  const auto f = safetensors_file::open(dir / "e.safetensors");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(fs::file_size(dir / "e.safetensors") % 8, 0u);
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

struct sharded : ::testing::Test {
  fs::path dir;
  std::vector<float> a{1, 2, 3, 4}, b{5, 6}, c{7};
  void SetUp() override {
    dir = scratch_dir();
    write_safetensors(dir / "model-00001-of-00002.safetensors",
                      {tensor_of("layer.0.w", {2, 2}, a), tensor_of("layer.0.b", {2}, b)});
    write_safetensors(dir / "model-00002-of-00002.safetensors", {tensor_of("layer.1.w", {1}, c)});
  }
  void write_index(const std::string& weight_map) {
    write_text(dir / "model.safetensors.index.json",
               "{\"metadata\": {\"total_size\": 28}, \"weight_map\": " + weight_map + "}");
  }
  std::string index() const { return (dir / "model.safetensors.index.json").string(); }
};

TEST_F(sharded, iterates_every_tensor_shard_by_shard) {
  write_index(R"({"layer.0.w": "model-00001-of-00002.safetensors",
                  "layer.0.b": "model-00001-of-00002.safetensors",
                  "layer.1.w": "model-00002-of-00002.safetensors"})");
  const auto ck = checkpoint::open(index());
  EXPECT_EQ(ck.shards().size(), 2u);
  EXPECT_EQ(ck.metadata().at("total_size"), "28");
  std::vector<std::string> names;
  std::vector<double> all;
  ck.for_each([&](const tensor_view& v) {
    names.push_back(v.name);
    for (double x : v.to_doubles()) all.push_back(x);
  });
  // Shard order, then data-offset order inside a shard (widest first, then by name).
  EXPECT_EQ(names, (std::vector<std::string>{"layer.0.b", "layer.0.w", "layer.1.w"}));
  EXPECT_EQ(all, (std::vector<double>{5, 6, 1, 2, 3, 4, 7}));
  EXPECT_EQ(ck.get("layer.1.w").to_doubles(), std::vector<double>{7});
  EXPECT_EQ(load_tensor(index() + ":layer.0.w").shape, (std::vector<std::uint64_t>{2, 2}));
}

TEST_F(sharded, index_outside_its_folder_is_rejected) {
  write_index(R"({"layer.0.w": "../model-00001-of-00002.safetensors"})");
  expect_input_error([&] { (void)checkpoint::open(index()); }, index(), "outside the index's folder");
  write_index(R"({"layer.0.w": ")" + (dir / "model-00001-of-00002.safetensors").string() + "\"}");
  expect_input_error([&] { (void)checkpoint::open(index()); }, index(), "must be a relative path");
  const auto outside = dir.parent_path() / "sharded_outside.safetensors";
  fs::copy_file(dir / "model-00002-of-00002.safetensors", outside,
                fs::copy_options::overwrite_existing);
  fs::create_symlink(outside, dir / "link.safetensors");
  write_index(R"({"layer.1.w": "link.safetensors"})");
  expect_input_error([&] { (void)checkpoint::open(index()); }, index(), "resolves outside");
  fs::remove(outside);
}

TEST_F(sharded, missing_shard_or_tensor_is_rejected) {
  write_index(R"({"layer.0.w": "model-00003-of-00003.safetensors"})");
  expect_input_error([&] { (void)checkpoint::open(index()); }, index(), "no such file");
  write_index(R"({"layer.9.w": "model-00001-of-00002.safetensors"})");
  expect_input_error([&] { (void)checkpoint::open(index()); }, index(),
                     "names tensor 'layer.9.w'");
  write_index(R"(["not", "an", "object"])");
  expect_input_error([&] { (void)checkpoint::open(index()); }, index(), "missing object 'weight_map'");
  write_text(dir / "model.safetensors.index.json", "[1]");
  expect_input_error([&] { (void)checkpoint::open(index()); }, index(), "not an object");
  write_index(R"({"a": 1})");
  expect_input_error([&] { (void)checkpoint::open(index()); }, index(), "must name a shard file");
}

TEST(load_tensor_spec, npy_safetensors_and_single_tensor_forms) {
  const auto dir = scratch_dir();
  const std::vector<float> f{1, 2, 3};
  write_npy(dir / "x.npy", std::vector<std::uint64_t>{3}, f);
  write_safetensors(dir / "one.safetensors", {tensor_of("only", {3}, f)});
  write_safetensors(dir / "two.safetensors", {tensor_of("p", {3}, f), tensor_of("q", {1, 3}, f)});
  const std::vector<double> want{1, 2, 3};
  EXPECT_EQ(load_tensor((dir / "x.npy").string()).to_doubles(), want);
  EXPECT_EQ(load_tensor((dir / "one.safetensors").string()).name, "only");
  const auto q = load_tensor((dir / "two.safetensors").string() + ":q");
  EXPECT_EQ(q.shape, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(q.to_doubles(), want);
  EXPECT_EQ(q.place(), (dir / "two.safetensors").string() + ":q");
  const std::string two = (dir / "two.safetensors").string();
  expect_input_error([&] { (void)load_tensor(two); }, two, "holds 2 tensors");
  expect_input_error([&] { (void)load_tensor(two + ":r"); }, two, "no tensor named 'r'");
  expect_input_error([&] { (void)load_tensor((dir / "x.npy").string() + ":a"); }, "x.npy",
                     "holds one array");
  expect_input_error([&] { (void)load_tensor((dir / "none.npy").string()); }, "none.npy",
                     "no such file");
}

TEST(load_tensor_spec, view_outlives_its_file_object) {
  const auto dir = scratch_dir();
  const std::vector<double> d{3.5, -1.0};
  write_safetensors(dir / "k.safetensors", {tensor_of("t", {2}, d)});
  tensor_view v = load_tensor((dir / "k.safetensors").string());
  fs::remove(dir / "k.safetensors");  // the mapping, not the path, holds the bytes
  EXPECT_EQ(v.to_doubles(), d);
}

}  // namespace
}  // namespace numprobe::io
