// Atomic writes onto targets that are not regular files. `--json /dev/null` is a common idiom;
// renaming a temporary over such a target would replace the device (as root, /dev/null
// itself) with a plain file. A FIFO stands in for the device here, so a regression cannot
// damage the machine that runs the test: the FIFO must still be a FIFO afterwards, and its
// reader must have received the bytes.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "numprobe/base/error.hpp"
#include "src/io/atomic_write.hpp"

namespace {

namespace fs = std::filesystem;

fs::path fresh(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("numprobe_atomic_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(atomic_write, a_fifo_target_is_written_in_place_and_stays_a_fifo) {
  const auto dir = fresh("fifo");
  const auto fifo = dir / "report.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    std::ifstream in(fifo);  // blocks until the writer opens the FIFO
    std::stringstream ss;
    ss << in.rdbuf();
    received = ss.str();
  });
  const std::string text = "{\"schema_version\": 2}\n";
  numprobe::io::detail::atomic_write(fifo, {bytes_of(text)});
  reader.join();
  struct stat st{};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced by a file";
  EXPECT_EQ(received, text);
  std::size_t left_over = 0;
  for (const auto& e : fs::directory_iterator(dir)) left_over += e.path() != fifo;
  EXPECT_EQ(left_over, 0u) << "no temporary file may be left beside the target";
  fs::remove_all(dir);
}

TEST(atomic_write, a_directory_target_is_an_input_error_naming_it) {
  const auto dir = fresh("dir");
  try {
    numprobe::io::detail::atomic_write(dir, {bytes_of("x")});
    FAIL() << "writing onto a directory must throw";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(dir));
  fs::remove_all(dir);
}

TEST(atomic_write, a_regular_target_is_replaced_whole) {
  const auto dir = fresh("regular");
  const auto f = dir / "r.json";
  std::ofstream(f) << "old contents that are longer than the new ones";
  numprobe::io::detail::atomic_write(f, {bytes_of("new")});
  std::ifstream in(f);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "new");
  fs::remove_all(dir);
}

}  // namespace
