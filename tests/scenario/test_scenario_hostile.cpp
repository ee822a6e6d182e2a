// Issue 15: scenario inputs that must be refused with a message naming the place: odd files,
// runaway sweeps, bounds on their own line, garbage journals, empty selections, skipped checks.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "numprobe/base/error.hpp"
#include "src/scenario/check_runner.hpp"
#include "src/scenario/run_scenario.hpp"
#include "src/scenario/scenario.hpp"

namespace sc = numprobe::scenario;
namespace fs = std::filesystem;

namespace {

template <class F>
std::string input_error(F&& fn) {
  try {
    fn();
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

fs::path scratch() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = fs::temp_directory_path() / "numprobe_scenario_hostile" / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(scenario_hostile, non_regular_scenario_files_are_refused) {
  const auto dir = scratch();
  ASSERT_EQ(::mkfifo((dir / "f.toml").c_str(), 0600), 0);
  for (const std::string& p : {std::string("/dev/zero"), (dir / "f.toml").string(), dir.string()}) {
    const auto msg = input_error([&] { (void)sc::load_scenario_file(p); });
    EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  }
}

// Five axes of 100 values: 10^10 checks. Refused before the product is built (this test
// would run out of memory otherwise), naming the sweep's line.
TEST(scenario_hostile, sweep_product_is_capped_before_expansion) {
  std::string values;
  for (int i = 0; i < 100; ++i) values += (i ? "," : "") + std::to_string(i);
  const std::string text = "[[check]]\nname = \"a\"\nprobe = \"quant\"\nsweep = { seed = [" + values +
                           "], worst = [" + values + "], group = [" + values + "] }\n";
  const auto msg = input_error([&] { (void)sc::parse_scenario(text, "big.toml"); });
  EXPECT_EQ(msg.rfind("big.toml:4: check 'a': sweep: expands to", 0), 0u) << msg;
  EXPECT_NE(msg.find("beyond the limit of 100000 checks"), std::string::npos) << msg;
}

TEST(scenario_hostile, sweep_below_the_cap_expands) {
  std::string values;
  for (int i = 0; i < 300; ++i) values += (i ? "," : "") + std::to_string(i);
  const auto s = sc::parse_scenario("[[check]]\nname = \"a\"\nprobe = \"quant\"\nsweep = { seed = [" + values +
                                        "], worst = [" + values + "] }\n",
                                    "ok.toml");
  EXPECT_EQ(s.checks.size(), 90000u);
}

TEST(scenario_hostile, unknown_metric_is_reported_on_the_bounds_line) {
  const auto msg = input_error([&] {
    (void)sc::parse_scenario("[[check]]\nname = \"a\"\nprobe = \"quant\"\nbounds = [\n  \"sqnr_db>=1\",\n"
                             "  \"sqnr>=1\",\n]\n",
                             "b.toml");
  });
  EXPECT_EQ(msg.rfind("b.toml:6: check 'a': bounds: 'sqnr>=1' names no metric", 0), 0u) << msg;
}

TEST(scenario_hostile, bound_without_basis_is_warned_about) {
  testing::internal::CaptureStderr();
  const auto s = sc::parse_scenario("[[check]]\nname = \"a\"\nprobe = \"quant\"\nbound = \"sqnr_db>=1\"\n", "w.toml");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning: w.toml:4: check 'a': bound: bound 'sqnr_db>=1' has no basis"), std::string::npos) << err;
  ASSERT_EQ(s.checks.size(), 1u);
  EXPECT_TRUE(s.checks[0].bounds[0].basis.empty());
  testing::internal::CaptureStderr();
  (void)sc::parse_scenario("[[check]]\nname = \"a\"\nprobe = \"quant\"\nbound = \"sqnr_db>=1\"\nbasis = \"x\"\n", "w.toml");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

const char* k_two = "[[check]]\nname = \"q1\"\nprobe = \"quant\"\nshape = \"16x64\"\n"
                    "[[check]]\nname = \"q2\"\nprobe = \"quant\"\nshape = \"16x64\"\n";

TEST(scenario_hostile, empty_filter_selection_is_an_input_error) {
  const auto s = sc::parse_scenario(k_two, "two.toml");
  sc::run_options o;
  o.filter = "zzz";
  const auto msg = input_error([&] { (void)sc::select_checks(s, o); });
  EXPECT_EQ(msg, "--filter: 'zzz' matches none of the scenario's 2 checks");
}

TEST(scenario_hostile, garbage_journal_is_called_garbage) {
  const auto dir = scratch();
  const auto s = sc::parse_scenario(k_two, "two.toml");
  sc::run_options o;
  o.journal = (dir / "journal.jsonl").string();
  o.resume = true;
  std::ofstream(o.journal) << "\x01\x02 not json at all\n";
  auto msg = input_error([&] { (void)sc::run_scenario(s, o); });
  EXPECT_NE(msg.find("not a numprobe journal"), std::string::npos) << msg;
  EXPECT_NE(msg.find("garbage or unreadable"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("different scenario"), std::string::npos) << msg;
  // A real header of another scenario is still "a different scenario".
  std::ofstream(o.journal, std::ios::trunc) << R"({"numprobe_journal":1,"fingerprint":"x","shard":"","backend":""})" << "\n";
  msg = input_error([&] { (void)sc::run_scenario(s, o); });
  EXPECT_NE(msg.find("different scenario"), std::string::npos) << msg;
  // A journal that is a directory or a device is refused, not read.
  fs::remove(o.journal);
  fs::create_directories(o.journal);
  msg = input_error([&] { (void)sc::run_scenario(s, o); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

TEST(scenario_hostile, interrupted_run_records_the_checks_not_run) {
  const auto s = sc::parse_scenario(k_two, "two.toml");
  sc::run_options o;
  sc::interrupt_requested().store(false);
  o.on_finish = [](const numprobe::result::check_result&) { sc::interrupt_requested().store(true); };
  const auto rr = sc::run_scenario(s, o);
  sc::interrupt_requested().store(false);
  EXPECT_TRUE(rr.incomplete);
  ASSERT_EQ(rr.checks.size(), 1u);
  ASSERT_EQ(rr.not_run.size(), 1u);
  EXPECT_EQ(rr.not_run[0], "quant:q2");
}

// The libFuzzer target found undefined behaviour inside toml++ 3.3: its whitespace lookup
// reaches __builtin_unreachable() on most code points of three ranges (e.g. U+00E9 'e acute',
// U+3001 ideographic comma), anywhere in the text. Those are refused by name and line before
// the parser runs; code points the lookup does classify (U+00A0, U+3000 ideographic space, CJK
// ideographs such as U+4E2D) still reach the parser.
TEST(scenario_hostile, code_points_the_toml_parser_cannot_classify_are_refused) {
  for (const auto& [bytes, name] : {std::pair<std::string, std::string>{"\xC3\xA9", "U+00E9"},
                                    {"\xE3\x80\x81", "U+3001"},
                                    {"\xEF\xBB\xBE", "U+FEFE"}}) {
    const std::string text = "title = \"t\"\n" + bytes + "[[check]]\nname = \"q\"\nprobe = \"quant\"\n";
    const auto msg = input_error([&] { (void)sc::parse_scenario(text, "u.toml"); });
    EXPECT_EQ(msg.rfind("u.toml:2: TOML", 0), 0u) << msg;
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  // Classified code points are not refused: in a string they parse as written.
  const auto s = sc::parse_scenario("title = \"\xC2\xA0 \xE3\x80\x80 \xE4\xB8\xAD\"\n[[check]]\nname = \"q\"\n"
                                    "probe = \"quant\"\n", "ok.toml");
  EXPECT_EQ(s.checks.size(), 1u);
}

}  // namespace
