// The GGUF parser (issue 29): images built byte by byte (a small writer below), versions 2 and
// 3, every metadata value type, alignments, tensor infos and their data; and hostile files, each
// of which must fail with a one-line input error (exit 2) naming the file and the field or
// tensor, before anything is allocated from a size read from the file.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "io_test_util.hpp"
#include "numprobe/io/gguf.hpp"

namespace numprobe::io {
namespace {

using test::expect_input_error;

// ---------------------------------------------------------------- a GGUF writer for tests
// A valid layout by default (keys, tensor infos, padding to the alignment, each tensor's data
// at an aligned offset), with every field open to corruption (counts, offsets, n_dims, raw
// key-value bytes).

using byte_vec = std::vector<std::byte>;

inline void put_le(byte_vec& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(std::byte((v >> (8 * i)) & 0xFF));
}

inline void put_str(byte_vec& out, std::string_view s) {
  put_le(out, s.size(), 8);
  for (const char c : s) out.push_back(static_cast<std::byte>(c));
}

// A value's bytes as the file holds it (no type field).
template <class T>
byte_vec le_bytes(T v) {
  byte_vec out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

struct gguf_image {
  struct tensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type = 0;
    byte_vec data;                        // when empty: filled, sized from ne and the type
    std::optional<std::uint64_t> offset;  // when empty: the next aligned offset
    std::optional<std::uint32_t> n_dims;  // when set: written instead of ne.size()
  };

  std::uint32_t version = 3;
  std::uint64_t alignment = 32;  // the padding used; set general.alignment to match
  std::optional<std::uint64_t> tensor_count;
  std::optional<std::uint64_t> kv_count;
  std::uint64_t n_kv = 0;
  byte_vec kv;
  std::vector<tensor> tensors;
  std::size_t cut_tail = 0;  // bytes removed from the end of the image

  // A key with a type number and the value's raw bytes.
  gguf_image& key(std::string_view k, std::uint32_t type, const byte_vec& value) {
    put_str(kv, k);
    put_le(kv, type, 4);
    kv.insert(kv.end(), value.begin(), value.end());
    ++n_kv;
    return *this;
  }
  template <class T>
  gguf_image& scalar(std::string_view k, gguf_value_type t, T v) {
    return key(k, static_cast<std::uint32_t>(t), le_bytes(v));
  }
  gguf_image& string(std::string_view k, std::string_view v) {
    byte_vec b;
    put_str(b, v);
    return key(k, static_cast<std::uint32_t>(gguf_value_type::m_string), b);
  }
  // An array: element type, count, and the elements' raw bytes.
  gguf_image& array(std::string_view k, gguf_value_type item, std::uint64_t count, const byte_vec& elems) {
    byte_vec b;
    put_le(b, static_cast<std::uint32_t>(item), 4);
    put_le(b, count, 8);
    b.insert(b.end(), elems.begin(), elems.end());
    return key(k, static_cast<std::uint32_t>(gguf_value_type::m_array), b);
  }
  gguf_image& strings(std::string_view k, const std::vector<std::string>& v) {
    byte_vec b;
    for (const auto& s : v) put_str(b, s);
    return array(k, gguf_value_type::m_string, v.size(), b);
  }
  gguf_image& add(std::string name, std::vector<std::uint64_t> ne, std::uint32_t type, byte_vec data = {},
                  std::optional<std::uint64_t> offset = std::nullopt) {
    tensor t;
    t.name = std::move(name);
    t.ne = std::move(ne);
    t.type = type;
    t.data = std::move(data);
    t.offset = offset;
    tensors.push_back(std::move(t));
    return *this;
  }

  // The data a tensor needs; 0 for an unknown type or one too large to build (a hostile ne).
  static std::uint64_t byte_size(const tensor& t) {
    const auto ti = find_ggml_type(t.type);
    if (!ti) return 0;
    std::uint64_t n = 1;
    for (const auto d : t.ne) {
      if (d != 0 && n > (std::uint64_t{1} << 24) / d) return 0;
      n *= d;
    }
    return n / static_cast<std::uint64_t>(ti->block_size) * static_cast<std::uint64_t>(ti->type_size);
  }

  // The image, and the data-section offsets the tensors got.
  [[nodiscard]] byte_vec bytes(std::vector<std::uint64_t>* offsets = nullptr,
                               std::uint64_t* data_start = nullptr) const {
    byte_vec out;
    out.push_back(std::byte{'G'});
    out.push_back(std::byte{'G'});
    out.push_back(std::byte{'U'});
    out.push_back(std::byte{'F'});
    put_le(out, version, 4);
    put_le(out, tensor_count.value_or(tensors.size()), 8);
    put_le(out, kv_count.value_or(n_kv), 8);
    out.insert(out.end(), kv.begin(), kv.end());
    byte_vec data;
    std::vector<std::uint64_t> at;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto& t = tensors[i];
      byte_vec payload = t.data;
      if (payload.empty()) {
        payload.resize(byte_size(t));
        for (std::size_t k = 0; k < payload.size(); ++k) payload[k] = std::byte((k * 7 + i * 31 + 1) & 0xFF);
      }
      const std::uint64_t off = t.offset.value_or((data.size() + alignment - 1) / alignment * alignment);
      // An offset far past the data (a hostile case) gets no data: the file stays small.
      if (off < (std::uint64_t{1} << 20) && !payload.empty()) {
        if (data.size() < off + payload.size()) data.resize(off + payload.size());
        std::memcpy(data.data() + off, payload.data(), payload.size());
      }
      at.push_back(off);
      put_str(out, t.name);
      put_le(out, t.n_dims.value_or(static_cast<std::uint32_t>(t.ne.size())), 4);
      for (const auto d : t.ne) put_le(out, d, 8);
      put_le(out, t.type, 4);
      put_le(out, off, 8);
    }
    if (!tensors.empty()) out.resize((out.size() + alignment - 1) / alignment * alignment);
    if (data_start != nullptr) *data_start = out.size();
    out.insert(out.end(), data.begin(), data.end());
    out.resize(out.size() - std::min(cut_tail, out.size()));
    if (offsets != nullptr) *offsets = at;
    return out;
  }
};


// ------------------------------------------------------------------------------ helpers

using vt = gguf_value_type;

constexpr std::uint32_t num(ggml_type t) { return static_cast<std::uint32_t>(t); }
constexpr std::uint32_t k_f32 = num(ggml_type::m_f32);

template <class T>
byte_vec elems(std::initializer_list<T> v) {
  byte_vec out;
  for (const T x : v) {
    const auto b = le_bytes(x);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

gguf_file parse_image(const byte_vec& b, const std::string& src = "t.gguf") {
  return gguf_file::parse(mapped_file::from_bytes(b, src));
}

// ------------------------------------------------------------------------------ valid files

gguf_image all_value_types(std::uint32_t version) {
  gguf_image g;
  g.version = version;
  g.scalar("t.u8", vt::m_u8, std::uint8_t{200});
  g.scalar("t.i8", vt::m_i8, std::int8_t{-5});
  g.scalar("t.u16", vt::m_u16, std::uint16_t{60000});
  g.scalar("t.i16", vt::m_i16, std::int16_t{-30000});
  g.scalar("t.u32", vt::m_u32, std::uint32_t{4000000000u});
  g.scalar("t.i32", vt::m_i32, std::int32_t{-2000000000});
  g.scalar("t.f32", vt::m_f32, 0.1f);
  g.scalar("t.bool", vt::m_bool, std::uint8_t{1});
  g.string("t.str", "h\xc3\xa9llo");
  g.scalar("t.u64", vt::m_u64, (std::uint64_t{1} << 63) + 5);
  g.scalar("t.i64", vt::m_i64, -(std::int64_t{1} << 62));
  g.scalar("t.f64", vt::m_f64, 1.0 / 3);
  g.array("a.u8", vt::m_u8, 3, elems<std::uint8_t>({1, 2, 255}));
  g.array("a.i8", vt::m_i8, 2, elems<std::int8_t>({-128, 127}));
  g.array("a.u16", vt::m_u16, 2, elems<std::uint16_t>({0, 65535}));
  g.array("a.i16", vt::m_i16, 2, elems<std::int16_t>({-1, 7}));
  g.array("a.u32", vt::m_u32, 1, elems<std::uint32_t>({123456789}));
  g.array("a.i32", vt::m_i32, 3, elems<std::int32_t>({1, -2, 3}));
  g.array("a.f32", vt::m_f32, 2, elems<float>({0.5f, -1.25f}));
  g.array("a.bool", vt::m_bool, 3, elems<std::uint8_t>({0, 1, 2}));
  g.strings("a.str", {"a", "bc", ""});
  g.array("a.u64", vt::m_u64, 1, elems<std::uint64_t>({~std::uint64_t{0}}));
  g.array("a.i64", vt::m_i64, 1, elems<std::int64_t>({std::numeric_limits<std::int64_t>::min()}));
  g.array("a.f64", vt::m_f64, 2, elems<double>({1e300, -0.0}));
  g.array("a.empty", vt::m_u32, 0, {});
  return g;
}

class gguf_versions : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(gguf_versions, every_value_type_reads_exactly) {
  const auto f = parse_image(all_value_types(GetParam()).bytes());
  EXPECT_EQ(f.version(), GetParam());
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_TRUE(f.tensors().empty());
  const auto& kv = f.metadata();
  ASSERT_EQ(kv.size(), 25u);
  EXPECT_EQ(kv.front().first, "t.u8");  // file order
  EXPECT_EQ(kv.back().first, "a.empty");
  const auto at = [&](std::string_view k) -> const gguf_value& {
    const auto* v = f.find_key(k);
    EXPECT_NE(v, nullptr) << k;
    static const gguf_value none;
    return v != nullptr ? *v : none;
  };
  EXPECT_EQ(f.find_key("missing"), nullptr);

  EXPECT_EQ(at("t.u8").type, vt::m_u8);
  EXPECT_EQ(at("t.u8").as_u64(), 200u);
  EXPECT_EQ(at("t.u16").as_u64(), 60000u);
  EXPECT_EQ(at("t.u32").as_u64(), 4000000000u);
  EXPECT_EQ(at("t.u64").as_u64(), (std::uint64_t{1} << 63) + 5);
  EXPECT_EQ(std::get<std::int64_t>(at("t.i8").scalar), -5);
  EXPECT_EQ(at("t.i8").as_u64(), std::nullopt);  // negative
  EXPECT_EQ(std::get<std::int64_t>(at("t.i16").scalar), -30000);
  EXPECT_EQ(std::get<std::int64_t>(at("t.i32").scalar), -2000000000);
  EXPECT_EQ(std::get<std::int64_t>(at("t.i64").scalar), -(std::int64_t{1} << 62));
  EXPECT_EQ(std::get<double>(at("t.f32").scalar), static_cast<double>(0.1f));
  EXPECT_EQ(std::get<double>(at("t.f64").scalar), 1.0 / 3);
  EXPECT_EQ(at("t.f32").as_u64(), std::nullopt);
  EXPECT_TRUE(std::get<bool>(at("t.bool").scalar));
  ASSERT_NE(at("t.str").as_string(), nullptr);
  EXPECT_EQ(*at("t.str").as_string(), "h\xc3\xa9llo");
  EXPECT_EQ(at("t.u8").as_string(), nullptr);

  EXPECT_EQ(at("t.u8").summary(), "200");
  EXPECT_EQ(at("t.i32").summary(), "-2000000000");
  EXPECT_EQ(at("t.f32").summary(), "0.1");  // in the stored precision, not 0.10000000149011612
  EXPECT_EQ(at("t.bool").summary(), "true");
  EXPECT_EQ(at("t.str").summary(), "\"h\xc3\xa9llo\"");

  const auto& s = at("a.str");
  EXPECT_EQ(s.type, vt::m_array);
  EXPECT_EQ(s.array_type, vt::m_string);
  ASSERT_EQ(s.array.size(), 3u);
  EXPECT_EQ(*s.array[1].as_string(), "bc");
  EXPECT_EQ(*s.array[2].as_string(), "");
  EXPECT_EQ(s.summary(), "[str x 3] \"a\", \"bc\", \"\"");
  EXPECT_EQ(at("a.i32").summary(2), "[i32 x 3] 1, -2, ...");
  EXPECT_EQ(at("a.empty").summary(), "[u32 x 0]");
  EXPECT_EQ(at("a.empty").array_type, vt::m_u32);
  EXPECT_EQ(at("a.u8").array[2].as_u64(), 255u);
  EXPECT_EQ(std::get<std::int64_t>(at("a.i8").array[0].scalar), -128);
  EXPECT_EQ(at("a.u16").array[1].as_u64(), 65535u);
  EXPECT_EQ(std::get<std::int64_t>(at("a.i16").array[0].scalar), -1);
  EXPECT_EQ(at("a.u32").array[0].as_u64(), 123456789u);
  EXPECT_EQ(std::get<double>(at("a.f32").array[1].scalar), -1.25);
  EXPECT_EQ(at("a.bool").summary(), "[bool x 3] false, true, true");  // ggml: any non-zero byte
  EXPECT_EQ(at("a.u64").array[0].as_u64(), ~std::uint64_t{0});
  EXPECT_EQ(std::get<std::int64_t>(at("a.i64").array[0].scalar), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(std::get<double>(at("a.f64").array[0].scalar), 1e300);
  EXPECT_TRUE(std::signbit(std::get<double>(at("a.f64").array[1].scalar)));
  EXPECT_EQ(at("a.f64").array_type, vt::m_f64);
}

INSTANTIATE_TEST_SUITE_P(gguf, gguf_versions, ::testing::Values(2u, 3u),
                         [](const auto& i) { return "v" + std::to_string(i.param); });

// A summary quotes what the file holds: control characters and invalid UTF-8 are escaped.
TEST(gguf, summary_escapes_untrusted_text) {
  gguf_image g;
  g.string("k", std::string("a\nb\x1b[2J\xff", 8));
  const auto f = parse_image(g.bytes());
  EXPECT_EQ(f.find_key("k")->summary(), "\"a\\nb\\x1b[2J\\xff\"");
}

gguf_image some_tensors(std::uint64_t alignment) {
  gguf_image g;
  g.alignment = alignment;
  g.string("general.name", "tiny");
  if (alignment != 32) g.scalar("general.alignment", vt::m_u32, static_cast<std::uint32_t>(alignment));
  g.add("w.f32", {3, 2}, k_f32);
  g.add("w.q4_0", {64, 2}, num(ggml_type::m_q4_0));
  g.add("w.q8_k", {256}, num(ggml_type::m_q8_k));  // not decoded, but a file may hold it
  g.add("w.f16", {2, 3, 4, 5}, num(ggml_type::m_f16));
  g.add("w.empty", {0, 4}, k_f32);  // ggml allows a zero-element tensor
  g.add("w.i32", {5}, num(ggml_type::m_i32));
  return g;
}

class gguf_alignments : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(gguf_alignments, tensor_infos_and_data_offsets) {
  const std::uint64_t align = GetParam();
  const auto g = some_tensors(align);
  std::vector<std::uint64_t> offsets;
  std::uint64_t data_start = 0;
  const auto b = g.bytes(&offsets, &data_start);
  const auto f = parse_image(b);
  EXPECT_EQ(f.alignment(), align);
  EXPECT_EQ(f.data_start(), data_start);
  EXPECT_EQ(f.data_start() % align, 0u);
  ASSERT_EQ(f.tensors().size(), g.tensors.size());
  for (std::size_t i = 0; i < g.tensors.size(); ++i) {
    const auto& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, g.tensors[i].name);  // file order
    EXPECT_EQ(num(t.type), g.tensors[i].type);
    EXPECT_EQ(t.ne, g.tensors[i].ne);
    EXPECT_EQ(t.offset, offsets[i]);
    EXPECT_EQ(t.offset % align, 0u);
    EXPECT_EQ(t.bytes, gguf_image::byte_size(g.tensors[i]));
    EXPECT_EQ(f.find(t.name), &t);
    const auto d = f.data(t);
    ASSERT_EQ(d.size(), t.bytes);
    if (t.bytes > 0) {
      EXPECT_EQ(d.data(), f.file()->bytes().data() + data_start + offsets[i]);
      EXPECT_EQ(std::memcmp(d.data(), b.data() + data_start + offsets[i], d.size()), 0);
    }
  }
  EXPECT_EQ(f.find("nope"), nullptr);
  const auto& q = *f.find("w.q4_0");
  EXPECT_EQ(q.bytes, 2u * 2u * 18u);  // 2 rows of 2 blocks of 18 bytes
  const auto& h = *f.find("w.f16");
  EXPECT_EQ(h.shape(), (std::vector<std::uint64_t>{5, 4, 3, 2}));  // ne reversed
  EXPECT_EQ(h.cols(), 2);
  EXPECT_EQ(h.rows(), 60);
  EXPECT_EQ(h.elements(), 120u);
  EXPECT_EQ(h.bytes, 240u);
  const auto& w = *f.find("w.f32");
  EXPECT_EQ(w.shape(), (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(w.rows(), 2);
  EXPECT_EQ(w.cols(), 3);
  const auto& k = *f.find("w.q8_k");
  EXPECT_EQ(k.rows(), 1);
  EXPECT_EQ(k.bytes, 292u);
  const auto& e = *f.find("w.empty");
  EXPECT_EQ(e.elements(), 0u);
  EXPECT_EQ(e.bytes, 0u);
  EXPECT_EQ(e.rows(), 4);
  EXPECT_TRUE(f.data(e).empty());
  f.release_pages(h);  // a copy: harmless
}

INSTANTIATE_TEST_SUITE_P(gguf, gguf_alignments, ::testing::Values(32u, 1u, 8u, 64u, 4096u),
                         [](const auto& i) { return "align" + std::to_string(i.param); });

// Without tensors ggml needs no padding after the key-values: the file may end there.
TEST(gguf, no_tensors_needs_no_padding) {
  gguf_image g;
  g.string("general.architecture", "llama");
  const auto b = g.bytes();
  EXPECT_NE(b.size() % 32, 0u);
  const auto f = parse_image(b);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(*f.find_key("general.architecture")->as_string(), "llama");
}

TEST(gguf, opens_a_file_and_checks_its_magic) {
  const auto dir = test::scratch_dir();
  const auto b = some_tensors(32).bytes();
  test::write_file(dir / "m.gguf", b);
  test::write_file(dir / "short.gguf", test::to_bytes("GGU"));
  test::write_file(dir / "other.bin", test::to_bytes("GGML and more"));
  EXPECT_TRUE(gguf_file::has_magic(dir / "m.gguf"));
  EXPECT_FALSE(gguf_file::has_magic(dir / "short.gguf"));
  EXPECT_FALSE(gguf_file::has_magic(dir / "other.bin"));
  EXPECT_FALSE(gguf_file::has_magic(dir / "missing.gguf"));
  const auto f = gguf_file::open(dir / "m.gguf");
  EXPECT_EQ(f.source(), (dir / "m.gguf").string());
  EXPECT_EQ(f.tensors().size(), 6u);
  expect_input_error([&] { (void)gguf_file::open(dir / "other.bin"); }, "other.bin", "magic");
}

// gguf-py's GGML_QUANT_SIZES (constants.py, QK_K = 256) and the list of decoded types.
TEST(gguf, type_table_matches_gguf_py) {
  struct row {
    std::uint32_t number;
    const char* name;
    std::int64_t block, bytes;
    bool decodes;
  };
  const row k_rows[] = {
      {0, "F32", 1, 4, true},        {1, "F16", 1, 2, true},           {2, "Q4_0", 32, 18, true},
      {3, "Q4_1", 32, 20, true},     {6, "Q5_0", 32, 22, true},        {7, "Q5_1", 32, 24, true},
      {8, "Q8_0", 32, 34, true},     {9, "Q8_1", 32, 40, false},       {10, "Q2_K", 256, 84, true},
      {11, "Q3_K", 256, 110, true},  {12, "Q4_K", 256, 144, true},     {13, "Q5_K", 256, 176, true},
      {14, "Q6_K", 256, 210, true},  {15, "Q8_K", 256, 292, false},    {16, "IQ2_XXS", 256, 66, false},
      {17, "IQ2_XS", 256, 74, false}, {18, "IQ3_XXS", 256, 98, false}, {19, "IQ1_S", 256, 50, false},
      {20, "IQ4_NL", 32, 18, true},  {21, "IQ3_S", 256, 110, false},   {22, "IQ2_S", 256, 82, false},
      {23, "IQ4_XS", 256, 136, true}, {24, "I8", 1, 1, false},         {25, "I16", 1, 2, false},
      {26, "I32", 1, 4, false},      {27, "I64", 1, 8, false},         {28, "F64", 1, 8, false},
      {29, "IQ1_M", 256, 56, false}, {30, "BF16", 1, 2, true},         {34, "TQ1_0", 256, 54, false},
      {35, "TQ2_0", 256, 66, false}, {39, "MXFP4", 32, 17, true},      {40, "NVFP4", 64, 36, true},
      {41, "Q1_0", 128, 18, false},
  };
  for (const auto& r : k_rows) {
    const auto t = find_ggml_type(r.number);
    ASSERT_TRUE(t.has_value()) << r.name;
    EXPECT_EQ(num(t->id), r.number);
    EXPECT_EQ(t->name, r.name);
    EXPECT_EQ(t->block_size, r.block) << r.name;
    EXPECT_EQ(t->type_size, r.bytes) << r.name;
    EXPECT_EQ(t->decodes, r.decodes) << r.name;
    EXPECT_EQ(info(t->id).name, r.name);
  }
  // Numbers ggml retired or never defined.
  for (const std::uint32_t n : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 42u, 1000u, ~0u}) {
    EXPECT_FALSE(find_ggml_type(n).has_value()) << n;
  }
  expect_input_error([] { (void)info(static_cast<ggml_type>(4)); }, "ggml type", "unknown type number 4");
}

TEST(gguf, decode_rows_refuses_a_type_it_does_not_decode) {
  const auto f = parse_image(some_tensors(32).bytes());
  expect_input_error([&] { (void)f.decode_rows(*f.find("w.q8_k"), 0, 1); }, "t.gguf:w.q8_k",
                     "type Q8_K is not one numprobe decodes");
  expect_input_error([&] { (void)f.decode_rows(*f.find("w.i32"), 0, 1); }, "t.gguf:w.i32",
                     "type I32 is not one numprobe decodes");
}

TEST(gguf, decode_rows_refuses_rows_out_of_range) {
  const auto f = parse_image(some_tensors(32).bytes());
  const auto& w = *f.find("w.f32");
  expect_input_error([&] { (void)f.decode_rows(w, 0, 3); }, "t.gguf:w.f32", "rows [0, 3) are outside");
  expect_input_error([&] { (void)f.decode_rows(w, -1, 1); }, "t.gguf:w.f32", "rows [-1, 1)");
  expect_input_error([&] { (void)f.decode_rows(w, 2, 1); }, "t.gguf:w.f32", "rows [2, 1)");
  gguf_tensor stranger = w;
  stranger.name = "other";
  expect_input_error([&] { (void)f.decode_rows(stranger, 0, 1); }, "t.gguf:other", "no such tensor");
}

TEST(gguf, decode_rows_of_f32_are_the_stored_values) {
  const std::vector<float> v{1.5f, -2.0f, 0.25f, 8.0f, 3.0f, -0.0f, 1e-40f, 65504.0f};
  gguf_image g;
  byte_vec payload(v.size() * 4);
  std::memcpy(payload.data(), v.data(), payload.size());
  g.add("w", {2, 4}, k_f32, payload);
  const auto f = parse_image(g.bytes());
  const auto& w = *f.find("w");
  const auto all = f.decode_rows(w, 0, 4);
  ASSERT_EQ(all.size(), 8u);
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(all[i]), std::bit_cast<std::uint32_t>(v[i])) << i;
  }
  const auto mid = f.decode_rows(w, 1, 3);
  ASSERT_EQ(mid.size(), 4u);
  EXPECT_EQ(mid[0], 0.25f);
  EXPECT_EQ(mid[3], -0.0f);
  EXPECT_TRUE(f.decode_rows(w, 2, 2).empty());
}

// ------------------------------------------------------------------------------ hostile files

struct hostile_case {
  std::string id;
  byte_vec bytes;
  std::string place;  // the file, or file:tensor
  std::string what;   // a phrase the message must contain
};

std::string case_name(const ::testing::TestParamInfo<hostile_case>& i) { return i.param.id; }

gguf_image one_tensor(std::uint32_t type = k_f32, std::vector<std::uint64_t> ne = {4, 2}) {
  gguf_image g;
  g.string("general.name", "m");
  g.add("w", std::move(ne), type);
  return g;
}

// A key-value's raw bytes after its key, followed by `tail` bytes so that the counts fit.
gguf_image raw_key(std::string_view key, std::uint32_t type, byte_vec value) {
  gguf_image g;
  g.key(key, type, value);
  return g;
}

byte_vec with_tail(byte_vec b, std::size_t n) {
  b.resize(b.size() + n, std::byte{0x11});
  return b;
}

std::vector<hostile_case> header_cases() {
  std::vector<hostile_case> c;
  const std::string f = "t.gguf";
  {
    auto b = one_tensor().bytes();
    b[3] = std::byte{'X'};
    c.push_back({"bad_magic", b, f, "magic \"GGUF\""});
  }
  c.push_back({"shorter_than_magic", test::to_bytes("GGU"), f, "magic"});
  c.push_back({"empty_file", {}, f, "magic"});
  {
    auto g = one_tensor();
    g.version = 1;
    c.push_back({"version_1", g.bytes(), f, "GGUF version 1 (32-bit counts) is not supported"});
    g.version = 4;
    c.push_back({"version_4", g.bytes(), f, "unsupported GGUF version 4"});
    g.version = 0;
    c.push_back({"version_0", g.bytes(), f, "unsupported GGUF version 0"});
    g.version = 0x03000000;
    c.push_back({"byte_swapped", g.bytes(), f, "looks byte-swapped"});
  }
  {
    auto b = one_tensor().bytes();
    b.resize(12);
    c.push_back({"truncated_header", b, f, "tensor_count: needs 8 bytes at offset 8"});
  }
  {
    auto g = one_tensor();
    g.kv_count = std::uint64_t{1} << 62;
    c.push_back({"kv_count_2_62", g.bytes(), f, "kv_count 4611686018427387904 cannot fit"});
    g.kv_count = ~std::uint64_t{0};
    c.push_back({"kv_count_max", g.bytes(), f, "kv_count 18446744073709551615 cannot fit"});
  }
  {
    auto g = one_tensor();
    g.tensor_count = std::uint64_t{1} << 62;
    c.push_back({"tensor_count_2_62", g.bytes(), f, "tensor_count 4611686018427387904 cannot fit"});
  }
  return c;
}

std::vector<hostile_case> kv_cases() {
  std::vector<hostile_case> c;
  const std::string f = "t.gguf";
  const auto str_t = static_cast<std::uint32_t>(vt::m_string);
  const auto arr_t = static_cast<std::uint32_t>(vt::m_array);
  {
    gguf_image g;
    test::append_le(g.kv, 1000, 8);  // a key length past the end
    g.n_kv = 1;
    c.push_back({"key_length_past_end", with_tail(g.bytes(), 40), f, "key 0: needs 1000 bytes"});
    g.kv.clear();
    test::append_le(g.kv, std::uint64_t{1} << 40, 8);
    c.push_back({"key_length_over_ggml_limit", with_tail(g.bytes(), 40), f,
                 "key 0: length 1099511627776 exceeds ggml's limit of 1073741824 bytes"});
  }
  {
    byte_vec v;
    put_le(v, 500, 8);
    c.push_back({"string_value_past_end", with_tail(raw_key("general.name", str_t, v).bytes(), 20), f,
                 "key 'general.name': needs 500 bytes"});
  }
  {
    byte_vec v;
    put_le(v, static_cast<std::uint32_t>(vt::m_u32), 4);
    put_le(v, 1000, 8);
    c.push_back({"array_count_past_end", with_tail(raw_key("a", arr_t, v).bytes(), 8), f,
                 "key 'a': array of 1000 u32 elements: needs 4000 bytes"});
  }
  {
    byte_vec v;
    put_le(v, static_cast<std::uint32_t>(vt::m_u8), 4);
    put_le(v, std::uint64_t{1} << 40, 8);
    c.push_back({"array_count_over_ggml_limit", with_tail(raw_key("a", arr_t, v).bytes(), 8), f,
                 "key 'a': array count 1099511627776 exceeds ggml's limit"});
  }
  {
    byte_vec v;
    put_le(v, str_t, 4);
    put_le(v, 100, 8);
    put_str(v, "x");
    c.push_back({"string_array_count_past_end", raw_key("tok", arr_t, v).bytes(), f,
                 "key 'tok': array of 100 str elements: needs 800 bytes"});
  }
  {
    byte_vec v;
    put_le(v, str_t, 4);
    put_le(v, 2, 8);
    put_str(v, "x");
    put_le(v, 1000000, 8);
    c.push_back({"string_in_array_past_end", with_tail(raw_key("tok", arr_t, v).bytes(), 30), f,
                 "key 'tok'[1]: needs 1000000 bytes"});
  }
  {
    byte_vec v;
    put_le(v, arr_t, 4);
    put_le(v, 1, 8);
    c.push_back({"nested_array", with_tail(raw_key("n", arr_t, v).bytes(), 30), f,
                 "key 'n': nested arrays are not allowed"});
  }
  c.push_back({"unknown_value_type", with_tail(raw_key("x", 13, {}).bytes(), 16), f,
               "key 'x': unknown value type 13"});
  {
    byte_vec v;
    put_le(v, 42, 4);
    put_le(v, 1, 8);
    c.push_back({"unknown_array_type", with_tail(raw_key("x", arr_t, v).bytes(), 16), f,
                 "key 'x': unknown array element type 42"});
  }
  {
    auto g = one_tensor();
    g.string("general.name", "again");
    c.push_back({"duplicate_key", g.bytes(), f, "duplicate key 'general.name'"});
  }
  {
    auto g = one_tensor();
    g.string("", "empty");
    c.push_back({"empty_key", g.bytes(), f, "key 1 is empty"});
  }
  {
    // Each array element costs a gguf_value: numprobe bounds their total.
    gguf_image g;
    std::vector<std::uint8_t> big((std::uint64_t{1} << 22) + 1, 7);
    byte_vec b(big.size());
    std::memcpy(b.data(), big.data(), big.size());
    g.array("a", vt::m_u8, big.size(), b);
    c.push_back({"metadata_over_numprobe_bound", g.bytes(), f,
                 "key 'a': array of 4194305 elements takes the metadata past 4194304"});
  }
  {
    auto g = one_tensor();
    g.scalar("general.alignment", vt::m_i32, std::int32_t{32});
    c.push_back({"alignment_i32", g.bytes(), f, "'general.alignment' must be of type u32, is i32"});
  }
  {
    auto g = one_tensor();
    g.scalar("general.alignment", vt::m_u64, std::uint64_t{32});
    c.push_back({"alignment_u64", g.bytes(), f, "must be of type u32, is u64"});
  }
  {
    auto g = one_tensor();
    g.string("general.alignment", "32");
    c.push_back({"alignment_string", g.bytes(), f, "must be of type u32, is str"});
  }
  {
    auto g = one_tensor();
    g.scalar("general.alignment", vt::m_u32, std::uint32_t{48});
    c.push_back({"alignment_48", g.bytes(), f, "general.alignment 48 is not a non-zero power of two"});
  }
  {
    auto g = one_tensor();
    g.scalar("general.alignment", vt::m_u32, std::uint32_t{0});
    c.push_back({"alignment_0", g.bytes(), f, "general.alignment 0 is not a non-zero power of two"});
  }
  return c;
}

std::vector<hostile_case> tensor_cases() {
  std::vector<hostile_case> c;
  const std::string f = "t.gguf";
  const std::string w = "t.gguf:w";
  {
    auto g = one_tensor();
    g.tensors[0].n_dims = 0;
    g.tensors[0].ne.clear();
    c.push_back({"n_dims_0", with_tail(g.bytes(), 64), w, "n_dims 0 is outside 1..4"});
  }
  c.push_back({"n_dims_5", one_tensor(k_f32, {1, 1, 1, 1, 1}).bytes(), w, "n_dims 5 is outside 1..4"});
  {
    auto g = one_tensor();
    g.tensors[0].n_dims = ~0u;
    c.push_back({"n_dims_max", g.bytes(), w, "n_dims 4294967295 is outside 1..4"});
  }
  c.push_back({"ne_negative", one_tensor(k_f32, {4, ~std::uint64_t{0}}).bytes(), w,
               "ne[1] = -1 is negative as ggml's int64"});
  c.push_back({"ne_product_overflows", one_tensor(k_f32, {std::uint64_t{1} << 32, std::uint64_t{1} << 32}).bytes(),
               w, "element count of ne = [4294967296, 4294967296...] overflows int64"});
  c.push_back({"ne_product_overflows_4d", one_tensor(k_f32, {65536, 65536, 65536, 65536}).bytes(), w,
               "overflows int64"});
  // Elements fit int64 but not bytes: 2^62 elements of 4 bytes.
  c.push_back({"byte_size_overflows", one_tensor(k_f32, {std::uint64_t{1} << 31, std::uint64_t{1} << 31}).bytes(),
               w, "the byte size of 4611686018427387904 blocks of F32 overflows"});
  c.push_back({"bytes_past_the_file", one_tensor(k_f32, {std::uint64_t{1} << 20, std::uint64_t{1} << 20}).bytes(),
               w, "data at offset 0 (4398046511104 bytes) runs past the end"});
  c.push_back({"unknown_type_99", one_tensor(99).bytes(), w, "unknown ggml type number 99"});
  c.push_back({"ne_overflow_beside_a_zero", one_tensor(k_f32, {0, std::uint64_t{1} << 32, std::uint64_t{1} << 32}).bytes(),
               w, "overflows int64"});
  c.push_back({"retired_type_4", one_tensor(4).bytes(), w, "unknown ggml type number 4"});
  c.push_back({"ne0_not_block_multiple", one_tensor(num(ggml_type::m_q4_0), {48, 1}).bytes(), w,
               "ne[0] = 48 is not a multiple of Q4_0's block size 32"});
  c.push_back({"ne0_not_superblock_multiple", one_tensor(num(ggml_type::m_q4_k), {128}).bytes(), w,
               "ne[0] = 128 is not a multiple of Q4_K's block size 256"});
  {
    auto g = one_tensor();
    g.tensors[0].offset = 16;
    c.push_back({"offset_unaligned", g.bytes(), w, "offset 16 is not a multiple of the alignment 32"});
  }
  {
    auto g = one_tensor();
    g.alignment = 64;
    g.scalar("general.alignment", vt::m_u32, std::uint32_t{64});
    g.tensors[0].offset = 32;
    c.push_back({"offset_unaligned_custom", g.bytes(), w, "offset 32 is not a multiple of the alignment 64"});
  }
  {
    auto g = one_tensor();
    g.tensors[0].offset = std::uint64_t{1} << 40;
    c.push_back({"offset_past_end", g.bytes(), w, "data at offset 1099511627776 (32 bytes) runs past the end"});
    g.tensors[0].offset = ~std::uint64_t{31};  // offset + bytes would wrap
    c.push_back({"offset_wraps", g.bytes(), w, "runs past the end of the 0-byte data section"});
  }
  {
    auto g = one_tensor();
    g.cut_tail = 4;
    c.push_back({"data_truncated", g.bytes(), w, "data at offset 0 (32 bytes) runs past the end of the 28-byte data section"});
  }
  {
    // Header 24 + info 33 (name "e") = 57 bytes, padded to 64; the last padding byte is missing.
    gguf_image g;
    g.add("e", {0}, k_f32);
    auto b = g.bytes();
    b.pop_back();
    c.push_back({"data_section_past_end", b, f, "the data section starts at 64 (the tensor infos end at 57"});
  }
  {
    gguf_image g;
    g.add("a", {8}, k_f32, {}, 0);
    g.add("b", {8}, k_f32, {}, 0);
    c.push_back({"overlap_same_offset", g.bytes(), "t.gguf:b", "data [0, 32) overlaps tensor 'a' at [0, 32)"});
  }
  {
    gguf_image g;
    g.add("a", {32}, k_f32, {}, 0);
    g.add("b", {8}, k_f32, {}, 160);
    g.add("c", {8}, k_f32, {}, 64);
    c.push_back({"overlap_inside", g.bytes(), "t.gguf:c", "data [64, 96) overlaps tensor 'a' at [0, 128)"});
  }
  {
    auto g = one_tensor();
    g.add("w", {4}, k_f32);
    c.push_back({"duplicate_tensor", g.bytes(), w, "duplicate tensor name 'w'"});
  }
  c.push_back({"name_too_long", [] {
                 gguf_image g;
                 g.add(std::string(64, 'n'), {4}, k_f32);
                 return g.bytes();
               }(), "t.gguf:nnnn", "tensor name of 64 bytes is too long (ggml's limit is 63)"});
  {
    gguf_image g;
    g.tensor_count = 1;
    auto b = g.bytes();
    test::append_le(b, 1000000, 8);
    c.push_back({"name_past_end", with_tail(b, 40), f, "tensor 0 name: needs 1000000 bytes"});
  }
  {
    // Header 24 + key 33 + name 9 + n_dims 4 + ne 16 + type 4 = 90: the offset's last 4 bytes cut.
    auto b = one_tensor().bytes();
    b.resize(94);
    c.push_back({"info_truncated", b, f, "tensor 'w' offset: needs 8 bytes at offset 90"});
  }
  // Untrusted names stay on one line and print no terminal control or invalid UTF-8.
  {
    gguf_image g;
    g.add("w\n\x1b[2J", {4}, 99);
    c.push_back({"control_chars_in_name", g.bytes(), "t.gguf:w\\n\\x1b[2J", "unknown ggml type number 99"});
  }
  {
    gguf_image g;
    g.add("\xff\xfe", {4}, k_f32);
    g.add("\xff\xfe", {4}, k_f32);
    c.push_back({"invalid_utf8_name", g.bytes(), "t.gguf:\\xff\\xfe", "duplicate tensor name '\\xff\\xfe'"});
  }
  return c;
}

class gguf_hostile : public ::testing::TestWithParam<hostile_case> {};

TEST_P(gguf_hostile, is_refused_naming_the_field) {
  const auto& p = GetParam();
  expect_input_error([&] { (void)parse_image(p.bytes); }, p.place, p.what);
}

INSTANTIATE_TEST_SUITE_P(header, gguf_hostile, ::testing::ValuesIn(header_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(kv, gguf_hostile, ::testing::ValuesIn(kv_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(tensor, gguf_hostile, ::testing::ValuesIn(tensor_cases()), case_name);

// A kv_count of 2^62 fails before anything is reserved: fast, and with one line.
TEST(gguf, huge_counts_fail_fast) {
  auto g = one_tensor();
  g.kv_count = std::uint64_t{1} << 62;
  g.tensor_count = std::uint64_t{1} << 62;
  const auto b = g.bytes();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    EXPECT_THROW((void)parse_image(b), numprobe::error);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
}

// Counts that would fit the file but not numprobe's memory bounds (each parsed entry costs
// several times its bytes): refused before anything is reserved.
TEST(gguf, counts_past_numprobe_bounds_are_refused) {
  gguf_image g;
  g.kv_count = (std::uint64_t{1} << 22) + 1;
  expect_input_error([&] { (void)parse_image(with_tail(g.bytes(), 14 * ((1u << 22) + 1))); }, "t.gguf",
                     "kv_count 4194305 exceeds numprobe's bound of 4194304 metadata elements");
  gguf_image t;
  t.tensor_count = (std::uint64_t{1} << 20) + 1;
  expect_input_error([&] { (void)parse_image(with_tail(t.bytes(), 32 * ((1u << 20) + 1))); }, "t.gguf",
                     "tensor_count 1048577 exceeds numprobe's bound of 1048576 tensors");
}

}  // namespace
}  // namespace numprobe::io
