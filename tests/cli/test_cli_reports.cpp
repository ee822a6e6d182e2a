// Issue 16: every command renders through the result model, so --json, --csv, --md, --html and
// --junit work on each of them, together, with one JSON schema (version 2) and one convention
// for non-finite numbers. Each case runs the real binary once with all five flags and checks
// every file: the envelope and the check in the JSON, the field path the command's issue named
// as a contract, a CSV header with rows, the Markdown title, a whole HTML page, and a JUnit
// testcase whose failure agrees with the exit code.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "numprobe/io/npy.hpp"
#include "support/run_command.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using numprobe::testing::run_numprobe;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct command_case {
  std::string name;      // test name
  std::string command;   // the command's name in the envelope ("formats show")
  std::string args;      // without the report flags
  int exit_code;         // what the case is built to give
  std::string contract;  // a JSON pointer the command's issue named (e.g. /points/0/seq)
};

const fs::path& scratch() {
  static const fs::path dir = [] {
    auto d = fs::temp_directory_path() / ("numprobe_cli_reports_" + std::to_string(::getpid()));
    fs::create_directories(d);
    // kl's two [N, V] logit files and scan's one tensor: seeded, non-constant values.
    const std::uint64_t n = 8, v = 64;
    std::vector<float> base(n * v), cand(n * v), w(32 * 64);
    for (std::size_t i = 0; i < base.size(); ++i) {
      base[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0);
      cand[i] = base[i] + static_cast<float>(0.01 * std::cos(1.3 * static_cast<double>(i)));
    }
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(std::sin(0.11 * static_cast<double>(i * i % 997)));
    const std::uint64_t shape_l[] = {n, v}, shape_w[] = {32, 64};
    numprobe::io::write_npy(d / "base.npy", shape_l, base);
    numprobe::io::write_npy(d / "cand.npy", shape_l, cand);
    numprobe::io::write_npy(d / "w.npy", shape_w, w);
    return d;
  }();
  return dir;
}

const std::string k_small = " --heads 2 --kv-heads 1 --head-dim 32 ";

std::vector<command_case> cases() {
  const std::string d = scratch().string();
  return {
      {"attention", "attention", "attention --backend emu --seq 130 --queries 64" + k_small, 0, "/result/kernel/rel_rms"},
      {"attention_breach", "attention", "attention --backend emu --seq 130 --queries 64 '--bound=rel_rms<=1e-30'" + k_small,
       1, "/gates/0/bound"},
      {"drift", "drift", "drift --backend emu --seq 63..160 --points 63,64,65,129 --tile 64x64" + k_small, 0,
       "/points/0/seq"},
      {"bisect", "bisect", "bisect --backend emu --seq 32..512 --dist diffuse --mask none --inject rowsum-bf16" + k_small,
       1, "/classification"},
      {"softmax", "softmax", "softmax --backend emu --vocab 3000 --rows 2 --chunk 1024", 0, "/result"},
      {"softmax_sweep", "softmax", "softmax --backend emu --vocab 1000..3100 --rows 2 --chunk 1024", 0, "/points/0/vocab"},
      {"quant", "quant", "quant --scheme nvfp4 --shape 32x64", 0, "/sqnr_db"},
      {"kl", "kl", "kl " + d + "/base.npy " + d + "/cand.npy", 0, "/kld/mean"},
      {"scan", "scan", "scan " + d + "/w.npy --format nvfp4", 0, "/tensors/0/name"},
      {"kvcache", "kvcache",
       "kvcache --seq 256,512 --kv-format e4m3fn --kv-scale tensor --scale-mult 1 --calib 0" + k_small + " --queries 2",
       0, "/points/0/seq"},
      {"invariance", "invariance",
       "invariance --backend emu --tile 32x32 --seq 65 --heads 2 --kv-heads 1 --head-dim 16 --batch-sizes 1,3"
       " --inject chunk-rescale --require chunk",
       1, "/invariance/3/ulp_histogram"},
      {"formats", "formats", "formats", 0, "/formats/0/name"},
      {"formats_show", "formats show", "formats show e5m2", 0, "/codes/0/code"},
      {"backends", "backends", "backends", 0, "/backends/0/name"},
  };
}

void PrintTo(const command_case& c, std::ostream* os) { *os << c.args; }

class EveryCommand : public ::testing::TestWithParam<command_case> {};

TEST_P(EveryCommand, WritesAllFiveReportsThroughTheResultModel) {
  const auto& c = GetParam();
  const fs::path dir = scratch() / c.name;
  fs::create_directories(dir);
  // Poisoned: a report the command fails to write must not pass as an old file.
  for (const char* f : {"r.json", "r.csv", "r.md", "r.html", "r.xml"}) std::ofstream(dir / f) << "poison";
  const auto r = run_numprobe(c.args + " --json " + (dir / "r.json").string() + " --csv " + (dir / "r.csv").string() +
                              " --md " + (dir / "r.md").string() + " --html " + (dir / "r.html").string() +
                              " --junit " + (dir / "r.xml").string());
  ASSERT_EQ(r.exit_code, c.exit_code) << r.err << r.out.substr(0, 2000);

  const auto j = json::parse(slurp(dir / "r.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << slurp(dir / "r.json").substr(0, 400);
  EXPECT_EQ(j.value("schema_version", 0), 2);
  EXPECT_EQ(j.value("tool", ""), "numprobe");
  EXPECT_EQ(j.value("command", ""), c.command);
  EXPECT_EQ(j.value("command_document", false), true);
  EXPECT_EQ(j.value("exit_code", -1), c.exit_code);
  ASSERT_TRUE(j.contains("checks") && j["checks"].is_array() && j["checks"].size() == 1) << j.dump().substr(0, 400);
  const auto& check = j["checks"][0];
  EXPECT_EQ(check.value("status", ""), c.exit_code == 0 ? "PASS" : c.exit_code == 1 ? "FAIL" : "ERROR");
  EXPECT_FALSE(check.contains("details")) << "a command's details are the document's top level";
  EXPECT_TRUE(j.contains(json::json_pointer(c.contract))) << c.contract << " missing in " << j.dump().substr(0, 600);

  const auto csv = slurp(dir / "r.csv");
  EXPECT_NE(csv, "poison");
  const auto first_nl = csv.find('\n');
  ASSERT_NE(first_nl, std::string::npos) << csv;
  EXPECT_NE(csv.find('\n', first_nl + 1), std::string::npos) << "a header and at least one row: " << csv;
  EXPECT_NE(csv.substr(0, first_nl).find(','), std::string::npos) << csv.substr(0, first_nl);

  const auto md = slurp(dir / "r.md");
  EXPECT_EQ(md.rfind("# numprobe " + c.command, 0), 0u) << md.substr(0, 200);

  const auto html = slurp(dir / "r.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u) << html.substr(0, 100);
  EXPECT_NE(html.find("</html>"), std::string::npos);

  const auto xml = slurp(dir / "r.xml");
  EXPECT_NE(xml.find("<testcase name=\"" + c.command + "\""), std::string::npos) << xml.substr(0, 600);
  EXPECT_EQ(xml.find("<failure") != std::string::npos, c.exit_code == 1) << xml.substr(0, 800);
}

INSTANTIATE_TEST_SUITE_P(cli_reports, EveryCommand, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// One convention: NaN and the infinities are the strings "nan", "inf", "-inf", never null.
// e5m2 has both infinities and NaN codes, so its code table holds each (exact values, not
// computed by the code under test: IEEE-style e5m2 encodes +inf as 0x7C, -inf as 0xFC).
TEST(cli_reports, non_finite_numbers_are_strings_in_every_document) {
  const auto r = run_numprobe("formats show e5m2 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  bool inf = false, ninf = false, nan = false;
  for (const auto& row : j.at("codes")) {
    ASSERT_FALSE(row.at("value").is_null()) << row.dump();
    if (row["code"] == "0x7C") inf = row["value"] == "inf";
    if (row["code"] == "0xFC") ninf = row["value"] == "-inf";
    if (row["value"].is_string() && row["value"] == "nan") nan = true;
  }
  EXPECT_TRUE(inf && ninf && nan) << j["codes"].dump().substr(0, 400);
}

// A report to stdout leaves the terminal report out, so `--md -` is a clean Markdown stream.
TEST(cli_reports, a_report_on_stdout_is_the_whole_stream) {
  const auto r = run_numprobe("quant --scheme nvfp4 --shape 32x64 --md -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# numprobe quant", 0), 0u) << r.out.substr(0, 300);
}

}  // namespace
