// Hostile .npy and .safetensors files, built byte by byte: each rejection rule of issue 3
// must produce a one-line input error (exit 2) naming the file and what is wrong.
#include <gtest/gtest.h>

#include "io_test_util.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/io/safetensors.hpp"

namespace numprobe::io {
namespace {

using test::expect_input_error;
using test::npy_image;
using test::st_image;

struct malformed_case {
  std::string id;
  std::vector<std::byte> bytes;
  std::string what;  // a phrase the message must contain
};

std::string case_name(const ::testing::TestParamInfo<malformed_case>& i) { return i.param.id; }

std::vector<std::byte> npy_with(std::string_view dict, std::size_t data) {
  return npy_image(dict, 1, data);
}

std::vector<malformed_case> npy_cases() {
  std::vector<malformed_case> c;
  const std::string ok_f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  {
    auto b = npy_with(ok_f4, 8);
    b[5] = std::byte{'X'};
    c.push_back({"bad_magic", b, "magic"});
  }
  c.push_back({"too_short", test::to_bytes("\x93NUM"), "magic"});
  {
    auto b = npy_with(ok_f4, 8);
    b[6] = std::byte{4};
    c.push_back({"unknown_version", b, "format version 4.0"});
  }
  {
    auto b = npy_with(ok_f4, 8);
    b[8] = std::byte{0xFF};
    b[9] = std::byte{0x7F};
    c.push_back({"header_length_beyond_file", b, "runs past the end"});
  }
  {
    std::vector<std::byte> b;
    test::append(b, "\x93NUMPY");
    b.push_back(std::byte{2});
    b.push_back(std::byte{0});
    test::append_le(b, 200u << 20, 4);  // 200 MiB
    test::append(b, "{}");
    c.push_back({"header_length_beyond_bound", b, "exceeds the bound"});
  }
  c.push_back({"fortran_order",
               npy_with("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16),
               "fortran_order True"});
  c.push_back({"unknown_descr",
               npy_with("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }", 16),
               "unsupported 'descr' '<c16'"});
  c.push_back({"big_endian",
               npy_with("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8),
               "big-endian"});
  c.push_back({"structured_descr",
               npy_with("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8),
               "structured"});
  c.push_back({"negative_dim",
               npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8),
               "negative dimension"});
  c.push_back({"absurd_dim",
               npy_with("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (123456789012345678901234567890,), }", 8),
               "absurd dimension"});
  c.push_back({"shape_product_overflow",
               npy_with("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (4294967296, 4294967296, 2), }", 8),
               "overflows 64 bits"});
  c.push_back({"shape_bytes_overflow",
               npy_with("{'descr': '<f8', 'fortran_order': False, "
                        "'shape': (4294967296, 1073741824), }", 8),
               "overflows 64 bits"});
  c.push_back({"truncated_data", npy_with(ok_f4, 5), "truncated data"});
  c.push_back({"trailing_bytes", npy_with(ok_f4, 12), "12 bytes follow the header"});
  c.push_back({"missing_shape", npy_with("{'descr': '<f4', 'fortran_order': False}", 8),
               "no 'shape'"});
  c.push_back({"extra_key",
               npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8),
               "unexpected header key 'x'"});
  c.push_back({"duplicate_key",
               npy_with("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                        "'shape': (2,)}", 8),
               "duplicate key 'descr'"});
  c.push_back({"shape_not_tuple",
               npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8),
               "must be a tuple"});
  c.push_back({"not_a_dict", npy_with("['descr', '<f4']", 8), "expected '{'"});
  c.push_back({"unterminated_string", npy_with("{'descr': '<f4", 0), "unterminated"});
  c.push_back({"v3_not_utf8",
               npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), '\xff': 1}",
                         3, 8),
               "not valid UTF-8"});
  return c;
}

class npy_malformed : public ::testing::TestWithParam<malformed_case> {};

TEST_P(npy_malformed, rejected_with_one_line_naming_file) {
  const auto& c = GetParam();
  const auto path = test::scratch_dir() / (c.id + ".npy");
  test::write_file(path, c.bytes);
  expect_input_error([&] { (void)read_npy(path); }, path.string(), c.what);
}

INSTANTIATE_TEST_SUITE_P(rules, npy_malformed, ::testing::ValuesIn(npy_cases()), case_name);

std::string one_tensor(std::string_view dtype, std::string_view shape, std::string_view offs) {
  return "{\"t\":{\"dtype\":\"" + std::string(dtype) + "\",\"shape\":" + std::string(shape) +
         ",\"data_offsets\":" + std::string(offs) + "}}";
}

std::vector<malformed_case> st_cases() {
  std::vector<malformed_case> c;
  c.push_back({"shorter_than_length_field", test::to_bytes("\x08" "abc"), "shorter than"});
  {
    std::vector<std::byte> b;
    test::append_le(b, 1000, 8);
    test::append(b, "{}");
    c.push_back({"header_length_beyond_file", b, "runs past the end"});
  }
  {
    std::vector<std::byte> b;
    test::append_le(b, 100'000'001, 8);
    test::append(b, "{}");
    c.push_back({"header_length_beyond_bound", b, "exceeds the bound"});
  }
  {
    std::vector<std::byte> b;
    test::append_le(b, ~std::uint64_t{0}, 8);
    c.push_back({"header_length_max_u64", b, "exceeds the bound"});
  }
  {  // a .npy array where a .safetensors file is expected (--against, --act-stats)
    std::vector<std::byte> b;
    test::append(b, "\x93NUMPY");
    b.push_back(std::byte{1});
    b.push_back(std::byte{0});
    test::append_le(b, 118, 2);
    test::append(b, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
    c.push_back({"npy_magic", b, "not a .safetensors file: it starts with the .npy magic"});
  }
  c.push_back({"not_utf8", st_image("{\"\xc3\x28\":1}", 0), "not valid UTF-8"});
  c.push_back({"overlong_utf8", st_image("{\"\xc0\xaf\":1}", 0), "not valid UTF-8"});
  c.push_back({"not_json", st_image("{\"t\": {", 0), "not valid JSON"});
  c.push_back({"json_array", st_image("[1, 2]", 0), "not an object"});
  c.push_back({"json_string", st_image("\"t\"", 0), "not an object"});
  c.push_back({"unknown_dtype", st_image(one_tensor("F7", "[2]", "[0, 2]"), 2),
               "unknown dtype 'F7'"});
  c.push_back({"complex_dtype", st_image(one_tensor("C64", "[1]", "[0, 8]"), 8),
               "unknown dtype 'C64'"});
  c.push_back({"offsets_outside_data", st_image(one_tensor("F32", "[2]", "[0, 8]"), 4),
               "outside the 4-byte data section"});
  c.push_back({"offsets_reversed", st_image(one_tensor("U8", "[0]", "[4, 2]"), 4),
               "begin > end"});
  c.push_back({"offsets_not_pair", st_image(one_tensor("U8", "[1]", "[0]"), 1),
               "must be [begin, end]"});
  c.push_back({"size_mismatch", st_image(one_tensor("F32", "[3]", "[0, 8]"), 8),
               "shape x dtype is 12 bytes but data_offsets span 8"});
  c.push_back({"negative_dim", st_image(one_tensor("F32", "[-2]", "[0, 8]"), 8),
               "negative value in 'shape'"});
  c.push_back({"fractional_dim", st_image(one_tensor("F32", "[2.5]", "[0, 8]"), 8),
               "non-negative integers"});
  c.push_back({"absurd_dim",
               st_image(one_tensor("F32", "[99999999999999999999999]", "[0, 8]"), 8),
               "non-negative integers"});
  c.push_back({"shape_product_overflow",
               st_image(one_tensor("U8", "[4294967296, 4294967296, 16]", "[0, 8]"), 8),
               "overflows 64 bits"});
  c.push_back({"shape_bytes_overflow",
               st_image(one_tensor("F64", "[4294967296, 536870912]", "[0, 8]"), 8),
               "overflows 64 bits"});
  c.push_back({"packed_not_whole_bytes", st_image(one_tensor("F4", "[3]", "[0, 2]"), 2),
               "not a whole number of bytes"});
  c.push_back({"overlap",
               st_image("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
                        6),
               "overlap tensor 'a'"});
  c.push_back({"hole",
               st_image("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}",
                        6),
               "hole of 2 bytes"});
  c.push_back({"trailing_data", st_image(one_tensor("U8", "[2]", "[0, 2]"), 5),
               "3 bytes after the last tensor"});
  c.push_back({"truncated_data", st_image(one_tensor("F32", "[4]", "[0, 16]"), 10),
               "outside the 10-byte data section"});
  c.push_back({"duplicate_names",
               st_image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                        "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                        2),
               "duplicate key 'a'"});
  c.push_back({"entry_not_object", st_image("{\"t\": 3}", 0), "must be an object"});
  c.push_back({"missing_dtype", st_image("{\"t\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
               "missing string 'dtype'"});
  c.push_back({"metadata_not_strings", st_image("{\"__metadata__\":{\"k\":1}}", 0),
               "must be a string"});
  c.push_back({"deep_nesting",
               st_image("{\"t\":{\"dtype\":\"U8\",\"shape\":[[[[[1]]]]],\"data_offsets\":[0,1]}}",
                        1),
               "nests deeper"});
  return c;
}

class safetensors_malformed : public ::testing::TestWithParam<malformed_case> {};

TEST_P(safetensors_malformed, rejected_with_one_line_naming_file) {
  const auto& c = GetParam();
  const auto path = test::scratch_dir() / (c.id + ".safetensors");
  test::write_file(path, c.bytes);
  expect_input_error([&] { (void)safetensors_file::open(path); }, path.string(), c.what);
}

INSTANTIATE_TEST_SUITE_P(rules, safetensors_malformed, ::testing::ValuesIn(st_cases()),
                         case_name);

TEST(safetensors_malformed_place, names_the_tensor) {
  const auto path = test::scratch_dir() / "named.safetensors";
  test::write_file(path, st_image(one_tensor("F32", "[3]", "[0, 8]"), 8));
  expect_input_error([&] { (void)safetensors_file::open(path); }, path.string() + ":t",
                     "shape x dtype");
}

TEST(safetensors_malformed_place, missing_file_is_an_input_error) {
  const auto path = test::scratch_dir() / "absent.safetensors";
  expect_input_error([&] { (void)safetensors_file::open(path); }, path.string(), "no such file");
}

}  // namespace
}  // namespace numprobe::io
