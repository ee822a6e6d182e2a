// Scenario parsing: the shipped files, sweeps and defaults, and every bad case with its line.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

#include "numprobe/base/error.hpp"
#include "src/scenario/check_runner.hpp"
#include "src/scenario/scenario.hpp"

namespace sc = numprobe::scenario;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The message of the input error parse_scenario throws (empty when it does not throw).
std::string parse_error(const std::string& text) {
  try {
    (void)sc::parse_scenario(text, "bad.toml");
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    return e.what();
  }
  return "";
}

TEST(scenario_parse, every_shipped_scenario_parses) {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(std::string(NUMPROBE_SOURCE_DIR) + "/scenarios"))
    if (f.path().extension() == ".toml") {
      const auto s = sc::load_scenario_file(f.path().string());
      EXPECT_FALSE(s.checks.empty()) << f.path();
      ++n;
    }
  EXPECT_GE(n, 5);
}

TEST(scenario_parse, embedded_default_is_the_shipped_default) {
  EXPECT_EQ(std::string(sc::default_scenario_text()),
            read_file(std::string(NUMPROBE_SOURCE_DIR) + "/scenarios/default.toml"));
}

TEST(scenario_parse, defaults_sweeps_and_bounds) {
  const auto s = sc::parse_scenario(R"(
title = "t"
[defaults]
seed = 5
heads = 4
scheme = "mxfp4"

[[check]]
name = "a"
probe = "attention"
seq = 100
kv_heads = 2
inject = "skip-rescale"
sweep = { dtype = ["bf16", "f16"], kv_heads = [1, 2] }
bound = "rel_rms<=4e-3"
basis = "two roundings"

[[check]]
name = "q"
probe = "quant"
bounds = ["sqnr_db>=10", { expr = "clipped<=0", basis = "rceil" }]
)", "x.toml");
  ASSERT_EQ(s.checks.size(), 5u);
  EXPECT_EQ(s.title, "t");
  EXPECT_EQ(s.checks[0].name, "a[dtype=bf16,kv_heads=1]");
  EXPECT_EQ(s.checks[3].name, "a[dtype=f16,kv_heads=2]");
  EXPECT_EQ(s.checks[3].get_string("dtype", ""), "f16");
  EXPECT_EQ(s.checks[3].get_int("kv_heads", 0), 2);
  EXPECT_EQ(s.checks[0].get_int("heads", 0), 4);  // from [defaults]
  EXPECT_EQ(s.checks[0].get_int("seed", 0), 5);
  EXPECT_FALSE(s.checks[0].has("scheme"));        // attention takes no scheme
  EXPECT_EQ(s.checks[0].get_strings("inject"), std::vector<std::string>{"skip-rescale"});
  ASSERT_EQ(s.checks[0].bounds.size(), 1u);
  EXPECT_EQ(s.checks[0].bounds[0].basis, "two roundings");
  EXPECT_EQ(s.checks[4].get_string("scheme", ""), "mxfp4");
  ASSERT_EQ(s.checks[4].bounds.size(), 2u);
  EXPECT_EQ(s.checks[4].bounds[1].basis, "rceil");
  EXPECT_EQ(s.checks[4].bounds[0].op, numprobe::bound_op::m_ge);
  // The fingerprint is stable and changes with the content.
  const auto one = sc::parse_scenario("[[check]]\nname = \"q\"\nprobe = \"quant\"\n", "y");
  const auto two = sc::parse_scenario("[[check]]\nname = \"q\"\nprobe = \"quant\"\nseed = 2\n", "y");
  EXPECT_EQ(one.fingerprint(), sc::parse_scenario("[[check]]\nname = \"q\"\nprobe = \"quant\"\n", "z").fingerprint());
  EXPECT_NE(one.fingerprint(), two.fingerprint());
}

struct bad_case {
  const char* label;
  const char* text;
  const char* expect;  // substring of the message, which starts "bad.toml:LINE: "
};

class scenario_bad : public ::testing::TestWithParam<bad_case> {};

TEST_P(scenario_bad, is_an_input_error_naming_file_line_and_key) {
  const auto msg = parse_error(GetParam().text);
  ASSERT_FALSE(msg.empty()) << "no error for " << GetParam().label;
  EXPECT_NE(msg.find(GetParam().expect), std::string::npos) << msg;
}

const bad_case k_bad[] = {
    {"toml_syntax", "[[check]]\nname = \"a\"\nprobe = = 3\n", "bad.toml:3: TOML"},
    {"unknown_key", "[[check]]\nname = \"a\"\nprobe = \"attention\"\nkv_head = 2\n",
     "bad.toml:4: check 'a': kv_head: unknown key for probe 'attention'"},
    {"wrong_type_int", "[[check]]\nname = \"a\"\nprobe = \"attention\"\n\nheads = \"8\"\n",
     "bad.toml:5: check 'a': heads: expected an integer, got a string"},
    {"wrong_type_string", "[[check]]\nname = \"a\"\nprobe = \"attention\"\ndtype = 16\n",
     "bad.toml:4: check 'a': dtype: expected a string, got an integer"},
    {"wrong_type_list", "[[check]]\nname = \"a\"\nprobe = \"attention\"\ninject = [1]\n",
     "bad.toml:4: check 'a': inject: expected an array of strings"},
    {"bad_bound_op", "[[check]]\nname = \"a\"\nprobe = \"attention\"\nbound = \"rel_rms=4\"\n",
     "bad.toml:4: check 'a': bound: 'rel_rms=4' is not METRIC<=X"},
    {"bad_bound_number", "[[check]]\nname = \"a\"\nprobe = \"attention\"\n\nbounds = [\"rel_rms<=x\"]\n",
     "bad.toml:5: check 'a': bounds: 'rel_rms<=x': threshold"},
    {"bound_wrong_type", "[[check]]\nname = \"a\"\nprobe = \"attention\"\nbound = 3\n",
     "bad.toml:4: check 'a': bound: expected a string"},
    {"bound_table_key", "[[check]]\nname = \"a\"\nprobe = \"attention\"\nbounds = [{ exp = \"rel_rms<=1\" }]\n",
     "bad.toml:4: check 'a': bounds.exp: unknown key in a bound"},
    {"unknown_metric", "[[check]]\nname = \"a\"\nprobe = \"quant\"\nbound = \"rel_rmss<=1\"\n",
     "bad.toml:4: check 'a': bound: 'rel_rmss<=1' names no metric of probe 'quant'"},
    {"unknown_probe", "[[check]]\nname = \"a\"\nprobe = \"atention\"\n",
     "bad.toml:3: check 'a': probe: unknown probe 'atention'"},
    {"missing_name", "title = \"t\"\n[[check]]\nprobe = \"quant\"\n", "bad.toml:2: name: missing"},
    {"missing_probe", "[[check]]\nname = \"a\"\n", "bad.toml:1: probe: missing"},
    {"no_checks", "title = \"t\"\n", "bad.toml:1: check: no [[check]] entries"},
    {"unknown_top_key", "titel = \"t\"\n[[check]]\nname = \"a\"\nprobe = \"quant\"\n",
     "bad.toml:1: titel: unknown top-level key"},
    {"unknown_default", "[defaults]\nbakend = \"emu\"\n[[check]]\nname = \"a\"\nprobe = \"quant\"\n",
     "bad.toml:2: defaults.bakend: unknown parameter"},
    {"default_wrong_type", "[defaults]\nseed = \"x\"\n[[check]]\nname = \"a\"\nprobe = \"quant\"\n",
     "bad.toml:2: defaults.seed: expected an integer"},
    {"duplicate_name", "[[check]]\nname = \"a\"\nprobe = \"quant\"\n[[check]]\nname = \"a\"\nprobe = \"quant\"\n",
     "bad.toml:4: check 'a': name: duplicate check name 'a'"},
    {"sweep_unknown", "[[check]]\nname = \"a\"\nprobe = \"quant\"\nsweep = { seqq = [1, 2] }\n",
     "bad.toml:4: check 'a': sweep.seqq: 'quant' takes no parameter 'seqq'"},
    {"sweep_empty", "[[check]]\nname = \"a\"\nprobe = \"quant\"\nsweep = { seed = [] }\n",
     "bad.toml:4: check 'a': sweep.seed: expected a non-empty array"},
    {"sweep_wrong_type", "[[check]]\nname = \"a\"\nprobe = \"quant\"\nsweep = { seed = [1, \"2\"] }\n",
     "bad.toml:4: check 'a': sweep.seed: expected an integer, got a string"},
    {"basis_without_bound", "[[check]]\nname = \"a\"\nprobe = \"quant\"\nbasis = \"x\"\n",
     "bad.toml:4: check 'a': basis: basis goes with bound"},
    {"check_not_table", "check = 3\n", "bad.toml:1: check: expected [[check]] tables"},
};

INSTANTIATE_TEST_SUITE_P(cases, scenario_bad, ::testing::ValuesIn(k_bad),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(scenario_parse, missing_file_is_an_input_error) {
  try {
    (void)sc::load_scenario_file("/nonexistent/x.toml");
    FAIL();
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), numprobe::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.toml"), std::string::npos);
  }
}

}  // namespace
