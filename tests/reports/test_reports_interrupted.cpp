// Issue 15: reports of an interrupted run list the checks that never ran, and carry the
// process's exit code (128 + the signal), in JUnit and in the JSON result.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "numprobe/core/result.hpp"
#include "reports/report_writer.hpp"

namespace {

using namespace numprobe;

result::run_result interrupted_run() {
  result::run_result r;
  r.scenario = "s";
  r.incomplete = true;
  r.checks_planned = 3;
  result::check_result c;
  c.name = "done";
  c.probe = "quant";
  c.outcome = result::status::m_pass;
  r.checks.push_back(c);
  r.not_run = {"attention:a[seq=64]", "quant:b"};
  r.signal = 2;  // SIGINT
  return r;
}

TEST(reports_interrupted, junit_lists_every_skipped_testcase) {
  std::ostringstream out;
  reports::junit_writer().write(interrupted_run(), out);
  const std::string x = out.str();
  EXPECT_NE(x.find("tests=\"3\" failures=\"0\" errors=\"0\" skipped=\"2\""), std::string::npos) << x;
  EXPECT_NE(x.find("<testcase name=\"a[seq=64]\" classname=\"numprobe.attention\" time=\"0\">\n      <skipped "),
            std::string::npos) << x;
  EXPECT_NE(x.find("<testcase name=\"b\" classname=\"numprobe.quant\""), std::string::npos) << x;
  const std::regex skipped("<skipped ");
  EXPECT_EQ(std::distance(std::sregex_iterator(x.begin(), x.end(), skipped), std::sregex_iterator()), 2);
}

TEST(reports_interrupted, json_exit_code_is_the_process_exit_code) {
  const auto r = interrupted_run();
  EXPECT_EQ(r.exit_code(), 130);
  const auto j = result::to_json(r);
  EXPECT_EQ(j["summary"]["exit_code"], 130);
  auto back = j;
  back["tool"] = "numprobe";
  const auto r2 = result::run_from_json(back, "x.json");
  EXPECT_EQ(r2.not_run, r.not_run);
  EXPECT_EQ(r2.exit_code(), 130);
  result::run_result clean;
  EXPECT_EQ(clean.exit_code(), 0);
}

}  // namespace
