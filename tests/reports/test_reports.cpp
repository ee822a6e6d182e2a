// Report writers on a synthetic result with every kind of content: real parsers read the output
// (nlohmann for JSON, xmllint and python3 for JUnit, headless Chromium for HTML).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <limits>
#include <regex>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "reports/report_checks.hpp"
#include "reports/report_files.hpp"
#include "reports/report_writer.hpp"

namespace r = numprobe::result;
namespace rep = numprobe::reports;
using namespace numprobe::testing;

namespace {

r::run_result sample() {
  r::run_result rr;
  rr.envelope = {{"tool", "numprobe"}, {"version", "0.1.0"}, {"git_revision", "abc"},
                 {"machine", {{"host", "h"}}}, {"seeds", {{"inputs", 7}}}};
  rr.scenario = "sample <&> \"scenario\"";
  rr.checks_planned = 3;
  rr.seconds = 1.5;
  r::check_result a;
  a.name = "drift<bf16>";
  a.probe = "drift";
  a.backend = "emu[tile=64x64]";
  a.case_id = "attention(T=8,S=8,Hq=1,Hkv=1,D=8,in=bf16,mask=causal,seed=7)";
  a.metrics = {{"growth.slope", 0.02, "", "fixed"}, {"rel_rms", 1.5e-3, "", "sci"}};
  a.gates = {{"growth.slope<=0.25", "growth.slope", 0.02, true, "flat error", a.case_id},
             {"rel_rms<=0.001", "rel_rms", 1.5e-3, false, "2 roundings", a.case_id}};
  a.outcome = r::status::m_fail;
  r::curve c{"err vs S", "S", "rel_rms", true, true, {}, {64, 128, 192, 256}, {{"rel_rms<=0.001", 1e-3}}};
  c.lines.push_back({"kernel", {63, 64, 65, 127, 128, 129, 255}, {1e-3, 1.1e-3, 1.2e-3, 1.3e-3, 1.5e-3, 1.4e-3, 1.5e-3}});
  c.lines.push_back({"naive", {63, 64, 65}, {2e-3, std::numeric_limits<double>::quiet_NaN(), 2e-3}});
  a.curves.push_back(c);
  a.histograms.push_back({"errors", "rel", true, {1e-4, 1e-3, 1e-2}, {3, 5}});
  a.heat_maps.push_back({"flushes", "flushed", "row", "col", 2, 3, 1, 1, {0, 1, 2, 3, 4, 5}});
  a.tables.push_back({"points", {"seq", "err"}, {{"64", "1e-3"}}});
  a.traces.push_back({"bisect trace", {"step", "verdict"}, {{"1", "l=bf16 -> fixed"}}});
  a.details = {{"points", {{{"seq", 64}}}}};
  r::check_result b;
  b.name = "quant";
  b.probe = "quant";
  b.outcome = r::status::m_pass;
  b.metrics = {{"sqnr_db", 21.0, "dB", "fixed"}, {"inf", std::numeric_limits<double>::infinity(), "", "sci"}};
  b.gates = {{"sqnr_db>=15", "sqnr_db", 21.0, true, "", "quant(...)"}};
  r::check_result e;
  e.name = "gpu";
  e.probe = "attention";
  e.outcome = r::status::m_error;
  e.error_code = 3;
  e.message = "--backend cuda: not compiled <in>";
  rr.checks = {a, b, e};
  return rr;
}

std::string temp_dir() {
  const auto d = std::filesystem::temp_directory_path() / ("numprobe_reports_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(result_model, exit_code_is_the_worst_outcome) {
  auto rr = sample();
  EXPECT_EQ(rr.exit_code(), 3);
  rr.checks[2].error_code = 2;
  EXPECT_EQ(rr.exit_code(), 2);
  rr.checks.pop_back();
  EXPECT_EQ(rr.exit_code(), 1);
  rr.checks.erase(rr.checks.begin());
  EXPECT_EQ(rr.exit_code(), 0);
}

TEST(json_report, round_trips_through_the_result_model) {
  const auto rr = sample();
  const auto text = rep::json_writer().render(rr);
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["schema_version"], r::k_result_schema_version);
  EXPECT_EQ(j["summary"]["exit_code"], 3);
  const auto back = r::run_from_json(j, "x.json");
  EXPECT_EQ(r::to_json(back), j);
  ASSERT_EQ(back.checks.size(), 3u);
  EXPECT_TRUE(std::isnan(back.checks[0].curves[0].lines[1].y[1]));
  EXPECT_TRUE(std::isinf(back.checks[1].metrics[1].value));
  EXPECT_EQ(back.checks[0].heat_maps[0].values[5], 5.0);
  EXPECT_EQ(back.checks[2].error_code, 3);
  EXPECT_THROW((void)r::run_from_json(nlohmann::json{{"tool", "x"}}, "bad.json"), numprobe::error);
}

TEST(terminal_report, one_line_per_check_and_colour_only_when_asked) {
  const auto rr = sample();
  const auto plain = rep::terminal_writer(false).render(rr);
  EXPECT_EQ(plain.find("\033["), std::string::npos);
  EXPECT_NE(plain.find("FAIL  drift<bf16>  rel_rms<=0.001 (measured 1.500e-03)"), std::string::npos) << plain;
  EXPECT_NE(plain.find("PASS  quant  sqnr_db>=15 (measured 21.000)"), std::string::npos) << plain;
  EXPECT_NE(plain.find("ERROR gpu  --backend cuda"), std::string::npos) << plain;
  EXPECT_NE(plain.find("3 checks: 1 passed, 1 failed, 1 errors"), std::string::npos);
  EXPECT_NE(rep::terminal_writer(true).render(rr).find("\033[1;31mFAIL"), std::string::npos);
}

TEST(markdown_report, summary_table_and_breaches) {
  const auto md = rep::markdown_writer().render(sample());
  EXPECT_NE(md.find("**ERROR** — 3 checks: 1 passed, 1 failed, 1 errors"), std::string::npos) << md;
  EXPECT_NE(md.find("| FAIL | drift<bf16> |"), std::string::npos) << md;
  EXPECT_NE(md.find("### Breaches"), std::string::npos);
  EXPECT_NE(md.find("basis: 2 roundings"), std::string::npos);
}

TEST(csv_report, one_row_per_curve_point) {
  const auto csv = rep::csv_writer().render(sample());
  EXPECT_EQ(csv.rfind("check,case,curve,series,x,y\n", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 7 + 3);
  EXPECT_NE(csv.find("\"kernel\",128,0.0015"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",nan\n"), std::string::npos);
}

TEST(junit_report, validates_against_the_schema_and_carries_measured_values) {
  const auto dir = temp_dir();
  rep::write_reports(sample(), {dir, {}});
  const std::string path = dir + "/junit.xml";
  bool checked = false;
  if (have_tool("xmllint")) {
    int rc = 0;
    const auto out = shell_output("xmllint --noout --schema '" NUMPROBE_SOURCE_DIR "/tests/reports/junit.xsd' '" + path + "' 2>&1", &rc);
    EXPECT_EQ(rc, 0) << out;
    checked = true;
  }
  if (have_tool("python3")) {
    int rc = 0;
    const auto out = shell_output(
        "python3 -c \"import sys,xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); "
        "s=r.find('testsuite'); c=s.findall('testcase'); f=[t.find('failure') for t in c]; "
        "print(len(c), s.get('failures'), s.get('errors'), [x.get('message') for x in f if x is not None])\" '" + path + "'",
        &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("3 1 1 ['rel_rms<=0.001 (measured 1.500e-03)']"), std::string::npos) << out;
    checked = true;
  }
  std::filesystem::remove_all(dir);
  if (!checked) GTEST_SKIP() << "neither xmllint nor python3 is installed";
}

TEST(html_report, is_self_contained) {
  const auto html = rep::html_writer().render(sample());
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_NE(html.find("sample &lt;&amp;&gt; &quot;scenario&quot;"), std::string::npos);
  EXPECT_NE(html.find("class=\"tile\""), std::string::npos);   // tile boundaries drawn
  EXPECT_NE(html.find("class=\"bound\""), std::string::npos);  // bound line drawn
  EXPECT_NE(html.find("bisect trace"), std::string::npos);
}

// The machine, devices and seeds rows are tables of their values, never JSON text: nested
// objects become dotted keys, an array of objects one row per element.
TEST(html_report, envelope_metadata_as_tables_not_json) {
  auto rr = sample();
  rr.envelope["machine"] = {{"host", "h<1>"}, {"os", "Linux"}, {"cpu", {{"model", "Xeon"}, {"cores", 2}}}};
  rr.envelope["devices"] = {{{"backend", "emu"}, {"description", "CPU emulation"}},
                            {{"backend", "cuda"}, {"properties", {{"sm", 90}, {"name", "H200"}}}, {"ids", {0, 1}}}};
  rr.envelope["seeds"] = {{"inputs", 7}, {"per_check", {{"drift", 11}}}};
  const auto html = rep::html_writer().render(rr);
  const auto begin = html.find("<table class=\"meta\">");
  const auto end = html.find("<th>status</th>");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const auto meta = html.substr(begin, end - begin);
  for (const char* json_mark : {"{", "}", "[", "]", "&quot;", "\":"})
    EXPECT_EQ(meta.find(json_mark), std::string::npos) << json_mark << " in\n" << meta;
  for (const char* cell : {"<td>host</td><td>h&lt;1&gt;</td>", "<td>cpu.model</td><td>Xeon</td>",
                           "<td>cpu.cores</td><td>2</td>", "<td>inputs</td><td>7</td>",
                           "<td>per_check.drift</td><td>11</td>",
                           // devices: columns are the union of the elements' flattened keys
                           // (nlohmann::json keeps an object's keys sorted)
                           "<th>backend</th><th>description</th><th>ids</th><th>properties.name</th><th>properties.sm</th>",
                           "<tr><td>emu</td><td>CPU emulation</td><td></td><td></td><td></td></tr>",
                           "<tr><td>cuda</td><td></td><td>0, 1</td><td>H200</td><td>90</td></tr>"})
    EXPECT_NE(meta.find(cell), std::string::npos) << cell << " not in\n" << meta;
  EXPECT_NE(meta.find("<td>version</td><td><code>0.1.0</code></td>"), std::string::npos) << meta;
}

TEST(html_report, renders_in_headless_chromium_with_points) {
  if (chromium_binary().empty()) GTEST_SKIP() << "chromium is not installed";
  const auto dir = temp_dir();
  rep::write_reports(sample(), {dir, {}});
  int rc = 0;
  std::string log;
  const auto dom = chromium_dom(dir + "/report.html", &rc, &log);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
  EXPECT_EQ(log.find("CONSOLE"), std::string::npos) << log;
  EXPECT_NE(dom.find("data-rendered=\"ok\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_NE(dom.find("data-plots=\"3\""), std::string::npos);
  EXPECT_NE(dom.find("data-empty-plots=\"0\""), std::string::npos);
  // Curve: 7 + 2 finite points; histogram: 2 bars; heat map: 6 cells.
  EXPECT_NE(dom.find("data-kind=\"curve\" viewBox=\"0 0 680 340\" width=\"680\" height=\"340\" role=\"img\" data-rendered-marks=\"9\""), std::string::npos) << dom.substr(0, 3000);
  EXPECT_NE(dom.find("data-rendered-marks=\"2\""), std::string::npos);
  EXPECT_NE(dom.find("data-rendered-marks=\"6\""), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
