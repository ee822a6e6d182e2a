// `--mpi` (issue 32 C) under a real `mpirun -n 2` on CPU backends: `scan --mpi` writes the
// unsharded scan's document, `run --mpi` the single-process run's checks, `drift --mpi` and
// `audit --mpi` the single-process command's document, every number included (the end-to-end
// errors too: the reference's last bits no longer depend on the process, reference/attention.cpp);
// a check that fails on one rank leaves the other ranks' checks done and the report names the
// rank and the case.
// Registered only in MPI builds with an mpirun (tests/cli/CMakeLists.txt, label mpi).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "numprobe/io/safetensors.hpp"
#include "support/run_command.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using numprobe::testing::command_result;
using numprobe::testing::numprobe_binary;
using numprobe::testing::run_numprobe;

struct mpi_dir {
  fs::path dir = fs::temp_directory_path() / ("numprobe_cli_mpi_" + std::to_string(::getpid()));
  mpi_dir() { fs::create_directories(dir); }
  ~mpi_dir() { fs::remove_all(dir); }
  [[nodiscard]] std::string path(const std::string& name) const { return (dir / name).string(); }
};

// mpirun -n 2 numprobe ARGS; stdout and stderr of every rank.
command_result mpirun2(const std::string& args, const mpi_dir& d) {
  const std::string out = d.path("mpi.out"), err = d.path("mpi.err");
  const std::string cmd = std::string(NUMPROBE_TEST_MPIRUN) + " -n 2 --oversubscribe --allow-run-as-root " +
                          numprobe_binary() + " " + args + " >" + out + " 2>" + err;
  command_result r;
  const int st = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream o(out), e(err);
  std::stringstream so, se;
  so << o.rdbuf();
  se << e.rdbuf();
  r.out = so.str();
  r.err = se.str();
  return r;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// What a second run may change: timing, the host's name and the process's own facts.
void strip_run_facts(json& j) {
  if (j.is_object()) {
    for (const char* k : {"seconds", "machine"}) j.erase(k);
    for (auto& [k, v] : j.items()) strip_run_facts(v);
  } else if (j.is_array()) {
    for (auto it = j.begin(); it != j.end();) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string() &&
          (*it)["text"].get<std::string>().find("MB/s") != std::string::npos) {
        it = j.erase(it);
        continue;
      }
      strip_run_facts(*it);
      ++it;
    }
  }
}

TEST(cli_mpi, scan_over_two_ranks_is_the_single_process_scan) {
  mpi_dir d;
  std::vector<numprobe::io::tensor_to_write> ts;
  std::vector<std::vector<float>> data(5);  // tensor_to_write holds a view: the values outlive it
  for (int k = 0; k < 5; ++k) {
    auto& w = data[static_cast<std::size_t>(k)];
    w.resize(static_cast<std::size_t>(16 * (k + 1)) * 32);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 2654435761u + k) % 1000) / 997.f - 0.5f;
    ts.push_back(numprobe::io::tensor_of("layers." + std::to_string(k) + ".w", {16u * (k + 1), 32}, w));
  }
  const std::string ckpt = d.path("m.safetensors");
  numprobe::io::write_safetensors(ckpt, ts);
  auto r = run_numprobe("scan " + ckpt + " --vs mxfp4 --json " + d.path("one.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = mpirun2("scan " + ckpt + " --vs mxfp4 --mpi --json " + d.path("two.json"), d);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto one = read_json(d.path("one.json")), two = read_json(d.path("two.json"));
  strip_run_facts(one);
  strip_run_facts(two);
  ASSERT_EQ(two["tensors"].size(), 5u);
  EXPECT_EQ(one.dump(1), two.dump(1));
}

const char* k_scenario = R"([defaults]
seed = 3
[[check]]
name = "emu-short"
probe = "attention"
backend = "emu"
seq = 40
heads = 2
kv_heads = 1
head_dim = 16
bound = "ratio_to_naive<=2"
[[check]]
name = "quant-breach"
probe = "quant"
scheme = "nvfp4"
shape = "16x64"
bound = "sqnr_db>=60"
[[check]]
name = "emu-point"
probe = "attention"
backend = "emu"
seq = 64
heads = 2
kv_heads = 1
head_dim = 16
bound = "ratio_to_naive<=2"
)";

TEST(cli_mpi, run_over_two_ranks_is_the_single_process_run) {
  mpi_dir d;
  std::ofstream(d.path("s.toml")) << k_scenario;
  // The single process also under MPI (a singleton: `--mpi` without mpirun).
  auto r = run_numprobe("run " + d.path("s.toml") + " --mpi --json " + d.path("one.json"));
  ASSERT_EQ(r.exit_code, 1) << r.err;  // quant-breach
  r = mpirun2("run " + d.path("s.toml") + " --mpi --json " + d.path("two.json"), d);
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out;
  auto one = read_json(d.path("one.json")), two = read_json(d.path("two.json"));
  for (json* doc : {&one, &two}) strip_run_facts(*doc);
  ASSERT_EQ(two["checks"].size(), 3u);
  EXPECT_TRUE(two["checks"][2]["details"].contains("end_to_end"));  // compared with the rest
  EXPECT_EQ(two["checks"][1]["name"], "quant-breach");  // scenario order, not rank order
  EXPECT_EQ(one.dump(1), two.dump(1));
}

TEST(cli_mpi, a_check_failing_on_one_rank_is_named_with_its_rank) {
  mpi_dir d;
  std::string s = k_scenario;
  // The second check (rank 1's) runs a kernel command that fails: an error, exit 3.
  const std::string from = "name = \"quant-breach\"\nprobe = \"quant\"\nscheme = \"nvfp4\"\nshape = \"16x64\"\n"
                           "bound = \"sqnr_db>=60\"\n";
  s.replace(s.find(from), from.size(),
            "name = \"broken-kernel\"\nprobe = \"attention\"\nbackend = \"exec:/bin/false {in} {out}\"\nseq = 32\n"
            "heads = 2\nkv_heads = 1\nhead_dim = 16\n");
  std::ofstream(d.path("s.toml")) << s;
  const auto r = mpirun2("run " + d.path("s.toml") + " --mpi --json " + d.path("two.json"), d);
  EXPECT_EQ(r.exit_code, 3) << r.err << r.out;
  const auto j = read_json(d.path("two.json"));
  ASSERT_EQ(j["checks"].size(), 3u);
  EXPECT_EQ(j["checks"][0]["status"], "PASS");
  EXPECT_EQ(j["checks"][2]["status"], "PASS");  // rank 0's second check ran after rank 1's failed
  EXPECT_EQ(j["checks"][1]["status"], "ERROR");
  EXPECT_EQ(j["checks"][1]["name"], "broken-kernel");
  const std::string message = j["checks"][1]["message"];
  EXPECT_EQ(message.rfind("rank 1: ", 0), 0u) << message;  // the rank, then the case
  EXPECT_NE(message.find("case attention(T=32,S=32,Hq=2,Hkv=1,D=16"), std::string::npos) << message;
}

// drift --mpi: the ranks share the lengths (round robin); the report is the single process's,
// breaches and tile pattern included (drop-tail-tile breaks lengths with a partial key tile).
TEST(cli_mpi, drift_over_two_ranks_is_the_single_process_drift) {
  mpi_dir d;
  const std::string args = "drift --backend emu --tile 32x32 --seq 40..300 --heads 2 --kv-heads 1 --head-dim 16 "
                           "--inject drop-tail-tile ";
  auto r = run_numprobe(args + "--json " + d.path("one.json"));
  ASSERT_EQ(r.exit_code, 1) << r.err;  // the tail-tile breaches
  r = mpirun2(args + "--mpi --json " + d.path("two.json"), d);
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out;
  auto one = read_json(d.path("one.json")), two = read_json(d.path("two.json"));
  for (json* doc : {&one, &two}) strip_run_facts(*doc);
  ASSERT_GT(two["points"].size(), 8u);
  EXPECT_FALSE(two["breaches"].empty());
  EXPECT_EQ(one.dump(1), two.dump(1));
}

// audit --mpi: the ranks share the classes, then every rank judges the audit from all the ranks'
// measurements: trace (its step numbers in the evidence included), verdicts and exit code are the
// single process's. drop-tail-tile fails the tail-tile class (rank 1's: rank 0 measures the
// baseline and every second class) and the baseline (rank 0's).
TEST(cli_mpi, audit_over_two_ranks_is_the_single_process_audit) {
  mpi_dir d;
  const std::string args = "audit --backend emu --tile 32x32 --seq 512 --quick --heads 4 --kv-heads 2 --head-dim 16 "
                           "--inject drop-tail-tile ";
  auto r = run_numprobe(args + "--json " + d.path("one.json"));
  ASSERT_EQ(r.exit_code, 1) << r.err;
  r = mpirun2(args + "--mpi --json " + d.path("two.json"), d);
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out;
  auto one = read_json(d.path("one.json")), two = read_json(d.path("two.json"));
  for (json* doc : {&one, &two}) strip_run_facts(*doc);
  ASSERT_GT(two["trace"].size(), 10u);
  bool tail_fails = false;
  for (const auto& c : two["classes"]) tail_fails = tail_fails || (c["name"] == "paged or tail tile" && c["verdict"] == "fail");
  EXPECT_TRUE(tail_fails);
  EXPECT_EQ(one.dump(1), two.dump(1));
}

TEST(cli_mpi, mpi_and_shard_together_exit_2) {
  mpi_dir d;
  std::ofstream(d.path("s.toml")) << k_scenario;
  const auto r = run_numprobe("run " + d.path("s.toml") + " --mpi --shard 0/2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--mpi"), std::string::npos) << r.err;
}

}  // namespace
