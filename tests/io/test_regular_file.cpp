// Issue 15 item 3: every reader refuses what is not a regular file, before opening it (a FIFO
// would block, /dev/zero never ends), and says which case it is.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io_test_util.hpp"
#include "numprobe/io/checkpoint.hpp"
#include "numprobe/io/load_tensor.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/io/regular_file.hpp"
#include "numprobe/io/safetensors.hpp"

namespace numprobe::io::test {
namespace {

namespace fs = std::filesystem;

// The message of the input error `fn` throws; fails the test when it throws none or another kind.
template <class F>
std::string input_error(F&& fn) {
  try {
    fn();
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

struct odd_paths {
  fs::path dir, fifo, loop, missing;
  explicit odd_paths(const fs::path& root) {
    dir = root / "a_dir.npy";
    fs::create_directories(dir);
    fifo = root / "a_fifo.npy";
    EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    loop = root / "loop.npy";
    fs::create_symlink(loop, loop);
    missing = root / "missing.npy";
  }
};

TEST(regular_file, each_kind_has_its_own_message) {
  const odd_paths p(scratch_dir());
  EXPECT_EQ(*why_not_regular(p.missing), "no such file");
  EXPECT_EQ(*why_not_regular(p.dir), "is a directory, not a regular file");
  EXPECT_EQ(*why_not_regular(p.fifo), "is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(*why_not_regular("/dev/zero"), "is a character device, not a regular file");
  EXPECT_NE(why_not_regular(p.loop)->find("symbolic link loop"), std::string::npos);
  EXPECT_FALSE(why_not_regular("/proc/self/exe").has_value());  // a symlink to a regular file
}

// Every loader: load_tensor (quant --input, kl), read_npy, safetensors, checkpoint (scan),
// read_text_file (scenarios, journals, merge). The FIFO case would hang without the check.
TEST(regular_file, every_loader_refuses_odd_files_naming_them) {
  const odd_paths p(scratch_dir());
  for (const fs::path& path : {p.dir, p.fifo, p.loop, fs::path("/dev/zero")}) {
    const std::string s = path.string();
    for (const auto& msg :
         {input_error([&] { (void)load_tensor(s); }), input_error([&] { (void)read_npy(path); }),
          input_error([&] { (void)safetensors_file::open(path); }),
          input_error([&] { (void)checkpoint::open(path); }),
          input_error([&] { (void)read_text_file(path, 1 << 20, "scenario file"); })}) {
      EXPECT_EQ(msg.rfind(s + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(input_error([&] { (void)load_tensor(p.missing.string()); }), p.missing.string() + ": no such file");
}

TEST(regular_file, text_files_are_capped) {
  const auto dir = scratch_dir();
  const auto big = dir / "big.toml";
  std::ofstream(big) << std::string(2000, 'x');
  EXPECT_EQ(read_text_file(big, 2000, "scenario file").size(), 2000u);
  const auto msg = input_error([&] { (void)read_text_file(big, 1999, "scenario file"); });
  EXPECT_NE(msg.find("2000 bytes, more than the 1999-byte limit"), std::string::npos) << msg;
}

TEST(regular_file, index_naming_itself_or_another_index_is_refused) {
  const auto dir = scratch_dir();
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {"w": "model.safetensors.index.json"}})";
  auto msg = input_error([&] { (void)checkpoint::open(dir / "model.safetensors.index.json"); });
  EXPECT_NE(msg.find("is this index itself"), std::string::npos) << msg;
  std::ofstream(dir / "other.json") << R"({"weight_map": {"w": "x.json"}})";
  std::ofstream(dir / "x.json") << R"({"weight_map": {}})";
  msg = input_error([&] { (void)checkpoint::open(dir / "other.json"); });
  EXPECT_NE(msg.find("is an index (.json), not a .safetensors shard"), std::string::npos) << msg;
}

TEST(regular_file, shard_that_is_a_directory_says_so) {
  const auto dir = scratch_dir();
  fs::create_directories(dir / "s.safetensors");
  std::ofstream(dir / "i.json") << R"({"weight_map": {"w": "s.safetensors"}})";
  const auto msg = input_error([&] { (void)checkpoint::open(dir / "i.json"); });
  EXPECT_NE(msg.find("shard 's.safetensors': is a directory"), std::string::npos) << msg;
}

}  // namespace
}  // namespace numprobe::io::test
