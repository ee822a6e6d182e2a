// `numprobe run` and `numprobe merge` through the real binary: exit codes, messages, every
// report file, shards and merge, resume after a kill, Ctrl-C partial reports.
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "numprobe/core/result.hpp"
#include "reports/report_checks.hpp"
#include "support/run_command.hpp"

using namespace numprobe::testing;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A fresh folder per test, removed at the end.
struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& tag)
      : path(fs::temp_directory_path() / ("numprobe_cli_run_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  [[nodiscard]] std::string str(const std::string& name = "") const { return (path / name).string(); }
};

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const std::string& p, const std::string& text) { std::ofstream(p) << text; }

// Quick checks: one pass, one breach.
const char* k_small = R"(title = "small"
[defaults]
seed = 3
[[check]]
name = "ref-pass"
probe = "attention"
backend = "ref"
seq = 40
heads = 2
kv_heads = 1
head_dim = 16
bound = "rel_rms<=0"
basis = "the reference against itself"
[[check]]
name = "emu-drift"
probe = "drift"
backend = "emu"
seq = "60..300"
heads = 2
kv_heads = 1
head_dim = 16
bounds = [{ expr = "ratio_to_naive<=2", basis = "FlashAttention" }]
[[check]]
name = "quant-breach"
probe = "quant"
scheme = "nvfp4"
shape = "16x64"
bound = "sqnr_db>=60"
basis = "fp4 cannot reach 60 dB"
[[check]]
name = "quant-pass"
probe = "quant"
scheme = "mxfp8"
shape = "16x64"
bound = "sqnr_db>=20"
)";

// Checks of a second or so each, to interrupt.
std::string slow_scenario(int n) {
  std::string s = "[defaults]\nbackend = \"emu\"\nheads = 4\nkv_heads = 1\nhead_dim = 64\nrows = \"all\"\n";
  for (int i = 0; i < n; ++i)
    s += "[[check]]\nname = \"slow-" + std::to_string(i) + "\"\nprobe = \"drift\"\nseq = \"64..1500\"\nseed = " +
         std::to_string(i + 1) + "\nbound = \"ratio_to_naive<=2\"\n";
  return s;
}

pid_t spawn_numprobe(const std::vector<std::string>& args) {
  std::vector<std::string> all{numprobe_binary()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

std::size_t journal_lines(const std::string& path) {
  const auto t = slurp(path);
  return static_cast<std::size_t>(std::count(t.begin(), t.end(), '\n'));
}

// Waits until the journal holds `lines` lines (header + finished checks).
bool wait_for_journal(const std::string& path, std::size_t lines, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    if (journal_lines(path) >= lines) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(cli_run, default_scenario_runs_from_any_directory_and_writes_every_report) {
  temp_dir d("default");
  const auto r = run_numprobe("run --out " + d.str("out"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS  attention-bf16-causal-gqa"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 checks: 5 passed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\033["), std::string::npos);  // stdout is a pipe: no colour
  for (const char* f : {"report.json", "junit.xml", "summary.md", "curves.csv", "report.html", "journal.jsonl"})
    EXPECT_TRUE(fs::exists(d.path / "out" / f)) << f;
  for (const auto& e : fs::directory_iterator(d.path / "out"))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "temporary file left: " << e.path();
  const auto j = json::parse(slurp(d.str("out/report.json")));
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["tool"], "numprobe");
  EXPECT_TRUE(j.contains("git_revision"));
  EXPECT_TRUE(j["machine"].contains("arch"));
  EXPECT_FALSE(j["devices"].empty());
  EXPECT_EQ(j["seeds"]["inputs"], 7);
  // Every drift point is in the details.
  for (const auto& c : j["checks"]) {
    if (c["probe"] == "drift") {
      EXPECT_GE(c["details"]["points"].size(), 10u);
    }
  }

  if (!chromium_binary().empty()) {
    int rc = 0;
    std::string log;
    const auto dom = chromium_dom(d.str("out/report.html"), &rc, &log);
    ASSERT_EQ(rc, 0) << log;
    EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
    EXPECT_NE(dom.find("data-rendered=\"ok\""), std::string::npos);
    EXPECT_NE(dom.find("data-empty-plots=\"0\""), std::string::npos);
    EXPECT_NE(dom.find("data-kind=\"curve\""), std::string::npos);
    EXPECT_NE(dom.find("data-kind=\"heatmap\""), std::string::npos);
  }
}

TEST(cli_run, breach_exits_1_and_reports_carry_measured_values) {
  temp_dir d("breach");
  write(d.str("s.toml"), k_small);
  const auto r = run_numprobe("run " + d.str("s.toml") + " --out " + d.str("out") + " --md " + d.str("x.md"));
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL  quant-breach  sqnr_db>=60 (measured "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  ref-pass"), std::string::npos);
  EXPECT_EQ(slurp(d.str("x.md")), slurp(d.str("out/summary.md")));
  const std::string junit = d.str("out/junit.xml");
  if (have_tool("xmllint")) {
    int rc = 0;
    const auto out = shell_output("xmllint --noout --schema '" NUMPROBE_SOURCE_DIR "/tests/reports/junit.xsd' '" + junit + "' 2>&1", &rc);
    EXPECT_EQ(rc, 0) << out;
  }
  if (have_tool("python3")) {
    int rc = 0;
    const auto out = shell_output(
        "python3 -c \"import sys,xml.etree.ElementTree as E; s=E.parse(sys.argv[1]).getroot().find('testsuite'); "
        "print(len(s.findall('testcase')), s.get('failures'), s.find('testcase/failure').get('message'))\" '" + junit + "'",
        &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("4 1 sqnr_db>=60 (measured "), std::string::npos) << out;
  }
  // JSON round trip through the result model.
  const auto j = json::parse(slurp(d.str("out/report.json")));
  EXPECT_EQ(numprobe::result::to_json(numprobe::result::run_from_json(j, "report.json")), j);
  // The drift curve reaches the CSV: one row per point and series.
  const auto csv = slurp(d.str("out/curves.csv"));
  EXPECT_NE(csv.find("\"emu-drift\""), std::string::npos);
}

TEST(cli_run, exit_codes_for_input_and_backend_errors) {
  temp_dir d("codes");
  write(d.str("s.toml"), k_small);
  write(d.str("bad.toml"), "[[check]]\nname = \"a\"\nprobe = \"attention\"\n\nkv_head = 2\n");
  auto r = run_numprobe("run " + d.str("bad.toml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(d.str("bad.toml") + ":5: check 'a': kv_head: unknown key"), std::string::npos) << r.err;
  write(d.str("bad2.toml"), "[[check]]\nname = \"a\"\nprobe = \"quant\"\nbound = \"sqnr_db=>3\"\n");
  r = run_numprobe("run " + d.str("bad2.toml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad2.toml:4:"), std::string::npos) << r.err;
  r = run_numprobe("run " + d.str("missing.toml"));
  EXPECT_EQ(r.exit_code, 2);
  // A backend that is not there: ERROR for the attention checks only, exit 3.
  r = run_numprobe("run " + d.str("s.toml") + " --backend cuda --filter 'ref-pass|quant-pass'");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("ERROR ref-pass"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  quant-pass"), std::string::npos) << r.out;
  r = run_numprobe("run " + d.str("s.toml") + " --filter '^quant-pass$'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("1 checks: 1 passed"), std::string::npos) << r.out;
  EXPECT_EQ(run_numprobe("run " + d.str("s.toml") + " --shard 2/2").exit_code, 2);
  EXPECT_EQ(run_numprobe("run " + d.str("s.toml") + " --filter '('").exit_code, 2);
  EXPECT_EQ(run_numprobe("run " + d.str("s.toml") + " --resume").exit_code, 2);
}

TEST(cli_run, shards_merge_back_into_the_unsharded_result) {
  temp_dir d("shard");
  write(d.str("s.toml"), k_small);
  for (int i = 0; i < 3; ++i)
    run_numprobe("run " + d.str("s.toml") + " --shard " + std::to_string(i) + "/3 --json " + d.str("s" + std::to_string(i) + ".json"));
  const auto m = run_numprobe("merge " + d.str("s2.json") + " " + d.str("s0.json") + " " + d.str("s1.json") + " --json -");
  ASSERT_EQ(m.exit_code, 1) << m.err;
  const auto j = json::parse(m.out);
  ASSERT_EQ(j["checks"].size(), 4u);
  EXPECT_EQ(j["checks"][0]["name"], "ref-pass");
  EXPECT_EQ(j["checks"][1]["name"], "emu-drift");
  EXPECT_EQ(j["checks"][2]["name"], "quant-breach");
  EXPECT_EQ(j["checks"][3]["name"], "quant-pass");
  EXPECT_EQ(j["incomplete"], false);
  // A missing shard marks the merge incomplete; the same shard twice is an input error.
  const auto part = run_numprobe("merge " + d.str("s0.json") + " " + d.str("s1.json") + " --json -");
  EXPECT_EQ(json::parse(part.out)["incomplete"], true);
  EXPECT_EQ(run_numprobe("merge " + d.str("s0.json") + " " + d.str("s0.json")).exit_code, 2);
}

TEST(cli_run, resume_after_a_kill_keeps_what_was_measured) {
  temp_dir d("kill");
  write(d.str("slow.toml"), slow_scenario(4));
  const auto journal = d.str("out/journal.jsonl");
  const pid_t pid = spawn_numprobe({"run", d.str("slow.toml"), "--out", d.str("out")});
  ASSERT_GT(pid, 0);
  const bool got = wait_for_journal(journal, 2, 120);  // header + one finished check
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(got) << "no check finished before the kill";
  ASSERT_TRUE(WIFSIGNALED(st));
  const auto kept = journal_lines(journal) - 1;
  ASSERT_LT(kept, 4u) << "the run finished before it could be killed";
  const auto r = run_numprobe("run " + d.str("slow.toml") + " --out " + d.str("out") + " --resume --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["checks"].size(), 4u);
  EXPECT_EQ(j["checks_resumed"].get<std::size_t>(), kept);
  EXPECT_EQ(j["incomplete"], false);
  EXPECT_EQ(j["checks"][0]["name"], "slow-0");
}

TEST(cli_run, ctrl_c_writes_partial_reports_marked_incomplete) {
  temp_dir d("sigint");
  write(d.str("slow.toml"), slow_scenario(4));
  const pid_t pid = spawn_numprobe({"run", d.str("slow.toml"), "--out", d.str("out")});
  ASSERT_GT(pid, 0);
  const bool got = wait_for_journal(d.str("out/journal.jsonl"), 2, 120);
  ::kill(pid, SIGINT);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(got);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 130);
  const auto j = json::parse(slurp(d.str("out/report.json")));
  EXPECT_EQ(j["incomplete"], true);
  EXPECT_LT(j["checks"].size(), 4u);
  EXPECT_GE(j["checks"].size(), 1u);
  EXPECT_NE(slurp(d.str("out/report.html")).find("Incomplete run"), std::string::npos);
  EXPECT_NE(slurp(d.str("out/summary.md")).find("Incomplete"), std::string::npos);
}

}  // namespace
