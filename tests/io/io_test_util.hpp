#pragma once
// Helpers shared by the io tests: a scratch folder per test, byte builders, and an assertion
// that a call fails with a one-line input error naming the file and the problem.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"

namespace numprobe::io::test {

inline std::filesystem::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  auto dir = std::filesystem::temp_directory_path() / "numprobe_io_tests" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::vector<std::byte> to_bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

inline void append(std::vector<std::byte>& out, std::string_view s) {
  const auto b = to_bytes(s);
  out.insert(out.end(), b.begin(), b.end());
}

inline void append_le(std::vector<std::byte>& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(std::byte((v >> (8 * i)) & 0xFF));
}

inline void write_file(const std::filesystem::path& p, const std::vector<std::byte>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// .npy image with a raw header text (no padding added), for malformed-file tests.
inline std::vector<std::byte> npy_image(std::string_view header, int major,
                                        std::size_t data_bytes) {
  std::vector<std::byte> out;
  append(out, "\x93NUMPY");
  out.push_back(std::byte(major));
  out.push_back(std::byte{0});
  append_le(out, header.size(), major == 1 ? 2 : 4);
  append(out, header);
  out.resize(out.size() + data_bytes, std::byte{0x3F});
  return out;
}

// .safetensors image from a raw JSON header and a data section of `data_bytes` bytes.
inline std::vector<std::byte> st_image(std::string_view json, std::size_t data_bytes) {
  std::vector<std::byte> out;
  append_le(out, json.size(), 8);
  append(out, json);
  out.resize(out.size() + data_bytes, std::byte{0});
  return out;
}

// `fn` must throw numprobe::error with exit 2, on one line, naming `place` and `what`.
inline void expect_input_error(const std::function<void()>& fn, const std::string& place,
                               const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one naming '" << place << "' and '" << what << "'";
  } catch (const numprobe::error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input) << msg;
    EXPECT_NE(msg.find(place), std::string::npos) << "message: " << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message spans lines: " << msg;
  }
}

}  // namespace numprobe::io::test
