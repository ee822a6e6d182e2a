// `convert --write` interrupted (issue 27 item 6): SIGINT, SIGTERM or SIGHUP while convert
// writes its shards leaves nothing behind (the shards written, their temporaries, and OUT, which
// convert created) and exits 128 + the signal (130, 143, 129), so the next try finds OUT free.
// The release is an AWQ GEMM checkpoint of 32 weights written here, one shard per weight; the
// signal comes once the first shard is in place (the process is stopped with SIGSTOP, signalled,
// and continued, so the signal lands while shards are still to be written).
#include <gtest/gtest.h>

#include <csignal>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "numprobe/io/safetensors.hpp"
#include "support/run_command.hpp"

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_weights = 32, k_out = 256, k_in = 4096, k_group = 128;

// AWQ GEMM (docs/checkpoints.md): qweight i32 [in, out/8], qzeros i32 [in/G, out/8], scales f16
// [in/G, out]; the values do not matter here, only that there is work to interrupt.
fs::path make_awq_release(const fs::path& dir) {
  fs::create_directories(dir);
  std::deque<std::vector<std::byte>> store;
  std::vector<numprobe::io::tensor_to_write> ts;
  const auto add = [&](std::string name, numprobe::io::dtype d, std::vector<std::uint64_t> shape, auto values) {
    auto& b = store.emplace_back(values.size() * sizeof(values[0]));
    std::memcpy(b.data(), values.data(), b.size());
    ts.push_back({std::move(name), d, std::move(shape), b});
  };
  const std::uint64_t words = k_out / 8, groups = k_in / k_group;
  const auto scale = static_cast<std::uint16_t>(numprobe::formats::encode(numprobe::formats::format_id::m_f16, 0.01));
  for (std::uint64_t w = 0; w < k_weights; ++w) {
    const std::string p = "model.layers." + std::to_string(w) + ".mlp.up_proj";
    add(p + ".qweight", numprobe::io::dtype::m_i32, {k_in, words}, std::vector<std::uint32_t>(k_in * words, 0x76543210u));
    add(p + ".qzeros", numprobe::io::dtype::m_i32, {groups, words}, std::vector<std::uint32_t>(groups * words, 0x88888888u));
    add(p + ".scales", numprobe::io::dtype::m_f16, {groups, k_out}, std::vector<std::uint16_t>(groups * k_out, scale));
  }
  numprobe::io::write_safetensors(dir / "model.safetensors", ts);
  std::ofstream(dir / "config.json")
      << R"({"quantization_config": {"quant_method": "awq", "version": "gemm", "bits": 4, "group_size": 128}})";
  return dir;
}

bool holds_a_shard(const fs::path& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const auto n = e.path().filename().string();
    if (n.starts_with("model-") && n.ends_with(".safetensors")) return true;
  }
  return false;
}

// The scratch folder (the release is shared by the three signals), removed when the tests end.
const fs::path& scratch_dir() {
  static const struct owned {
    fs::path dir = fs::temp_directory_path() / ("numprobe_cli_convert_" + std::to_string(::getpid()));
    ~owned() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } s;
  return s.dir;
}

class convert_signal : public ::testing::TestWithParam<int> {};

TEST_P(convert_signal, while_writing_removes_the_partial_output_and_exits_128_plus_the_signal) {
  const int sig = GetParam();
  const fs::path& dir = scratch_dir();
  const fs::path rel = dir / "rel";
  if (!fs::exists(rel / "model.safetensors")) make_awq_release(rel);
  const fs::path out = dir / ("out_" + std::to_string(sig));
  const fs::path err = dir / ("err_" + std::to_string(sig));
  fs::remove_all(out);
  const std::string bin = numprobe::testing::numprobe_binary();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::FILE* e = std::freopen(err.c_str(), "w", stderr);
    std::FILE* o = std::freopen("/dev/null", "w", stdout);
    (void)e;
    (void)o;
    ::execl(bin.c_str(), bin.c_str(), "convert", rel.c_str(), "--to", "mxfp4", "--write", out.c_str(), "--shard-gib",
            "0.0001", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for the first shard in place, then stop convert, signal it and let it go on.
  bool seen = false, exited = false;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (holds_a_shard(out)) {
      ::kill(pid, SIGSTOP);
      seen = true;
      break;
    }
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (!exited) {
    ::kill(pid, sig);
    ::kill(pid, SIGCONT);
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  }
  std::ifstream ef(err);
  const std::string text((std::istreambuf_iterator<char>(ef)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(seen) << "convert ended (or never wrote a shard) before the signal could be sent: " << text;
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << " without cleaning up";
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << text;
  EXPECT_NE(text.find("interrupted by"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(out)) << out << " left behind";
  // The folder is free again: the next try writes it whole.
  const auto again = numprobe::testing::run_numprobe("convert " + rel.string() + " --to mxfp4 --filter 'layers\\.(0|1)\\.' --write " +
                                                     out.string());
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(signals, convert_signal, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const auto& info) {
                           return std::string(info.param == SIGINT ? "SIGINT" : info.param == SIGTERM ? "SIGTERM" : "SIGHUP");
                         });

}  // namespace
