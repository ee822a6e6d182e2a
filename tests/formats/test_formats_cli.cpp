// `numprobe formats` and `numprobe formats show F`: the built binary's real output and exit
// codes. Expected values are the format definitions (NUMERICS.md), written out by hand.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct result {
  int status = -1;
  std::string out;  // stdout and stderr together
};

result run(const std::string& args) {
  const std::string cmd = std::string(NUMPROBE_BINARY_DIR) + "/numprobe " + args + " 2>&1";
  result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

nlohmann::json run_json(const std::string& args) {
  const auto r = run(args);
  EXPECT_EQ(r.status, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

const nlohmann::json& by_name(const nlohmann::json& arr, const std::string& name) {
  for (const auto& e : arr)
    if (e.at("name") == name) return e;
  throw std::runtime_error("no entry " + name);
}

using pairs = std::vector<std::vector<std::string>>;

TEST(formats_cli, list_json_has_every_format_with_its_facts) {
  const auto doc = run_json("formats --json -");
  EXPECT_EQ(doc.at("schema_version"), 2);
  EXPECT_EQ(doc.at("tool"), "numprobe");
  const auto& fs = doc.at("formats");
  for (const char* n : {"f32", "tf32", "bf16", "f16", "e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz",
                        "e2m3", "e3m2", "e2m1", "e8m0", "int8", "int4", "uint4"})
    EXPECT_NO_THROW((void)by_name(fs, n)) << n;

  const auto& e4 = by_name(fs, "e4m3fn");
  EXPECT_EQ(e4.at("max_finite").get<double>(), 448.0);
  EXPECT_EQ(e4.at("max_finite_code"), "0x7E");
  EXPECT_EQ(e4.at("bias"), 7);
  EXPECT_EQ(e4.at("min_subnormal").get<double>(), std::ldexp(1.0, -9));
  EXPECT_EQ(e4.at("nan_codes").get<pairs>(), (pairs{{"0x7F", "0x7F"}, {"0xFF", "0xFF"}}));
  EXPECT_TRUE(e4.at("inf_codes").empty());
  EXPECT_EQ(e4.at("default_overflow"), "nan");

  const auto& e5 = by_name(fs, "e5m2");
  EXPECT_EQ(e5.at("inf_codes").get<std::vector<std::string>>(),
            (std::vector<std::string>{"0x7C", "0xFC"}));
  EXPECT_EQ(e5.at("nan_codes").get<pairs>(), (pairs{{"0x7D", "0x7F"}, {"0xFD", "0xFF"}}));
  EXPECT_EQ(e5.at("default_overflow"), "inf");

  const auto& uz = by_name(fs, "e4m3fnuz");
  EXPECT_EQ(uz.at("max_finite").get<double>(), 240.0);
  EXPECT_EQ(uz.at("nan_codes").get<pairs>(), (pairs{{"0x80", "0x80"}}));
  EXPECT_TRUE(uz.at("negative_zero_code").is_null());

  const auto& e8 = by_name(fs, "e8m0");
  EXPECT_EQ(e8.at("min_normal").get<double>(), std::ldexp(1.0, -127));
  EXPECT_EQ(e8.at("max_finite").get<double>(), std::ldexp(1.0, 127));
  EXPECT_EQ(e8.at("max_finite_code"), "0xFE");
  EXPECT_EQ(e8.at("nan_codes").get<pairs>(), (pairs{{"0xFF", "0xFF"}}));

  const auto& f16 = by_name(fs, "f16");
  EXPECT_EQ(f16.at("nan_codes").get<pairs>(), (pairs{{"0x7C01", "0x7FFF"}, {"0xFC01", "0xFFFF"}}));
  EXPECT_EQ(by_name(fs, "bf16").at("max_finite").get<double>(), std::ldexp(255.0, 120));
  EXPECT_TRUE(by_name(fs, "e2m1").at("nan_codes").empty());
  EXPECT_EQ(by_name(fs, "int4").at("lowest").get<double>(), -8.0);

  // Schemes with bits per element including scales. MX fp4: 4 bits plus one 8-bit e8m0
  // scale per 32 elements = 4.25 (NUMERICS.md, "+0.25 bit").
  const auto& schemes = doc.at("schemes");
  ASSERT_FALSE(schemes.empty());
  EXPECT_EQ(by_name(schemes, "mxfp4").at("bits_per_element").get<double>(), 4.25);
}

TEST(formats_cli, list_text_and_json_file) {
  const std::string path = ::testing::TempDir() + "numprobe_formats.json";
  const auto r = run("formats --json " + path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("e4m3fn"), std::string::npos);
  EXPECT_NE(r.out.find("0x7F,0xFF"), std::string::npos);  // e4m3fn's NaN codes
  EXPECT_NE(r.out.find("mxfp4"), std::string::npos);
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc.at("schema_version"), 2);
  EXPECT_EQ(by_name(doc.at("formats"), "e2m3").at("max_finite").get<double>(), 7.5);
}

TEST(formats_cli, show_e2m1_lists_every_code) {
  const auto doc = run_json("formats show e2m1 --json -");
  EXPECT_EQ(doc.at("schema_version"), 2);
  const auto& codes = doc.at("codes");
  ASSERT_EQ(codes.size(), 16u);
  const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const double v = codes[c].at("value").get<double>();
    EXPECT_EQ(std::fabs(v), mags[c & 7]) << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << c;  // 0x8 is -0
  }
  EXPECT_EQ(codes[1].at("class"), "subnormal");
  EXPECT_EQ(codes[7].at("code"), "0x7");
}

TEST(formats_cli, show_fnuz_and_e8m0_specials) {
  auto doc = run_json("formats show e4m3fnuz --json -");
  auto& codes = doc.at("codes");
  ASSERT_EQ(codes.size(), 256u);
  EXPECT_EQ(codes[0x80].at("value"), "nan");
  EXPECT_EQ(codes[0x7F].at("value").get<double>(), 240.0);
  EXPECT_EQ(codes[0xFF].at("value").get<double>(), -240.0);
  doc = run_json("formats show e5m2 --json -");
  EXPECT_EQ(doc.at("codes")[0x7C].at("value"), "inf");
  EXPECT_EQ(doc.at("codes")[0xFC].at("value"), "-inf");
  EXPECT_EQ(doc.at("codes")[0x7B].at("value").get<double>(), 57344.0);
  doc = run_json("formats show e8m0 --json -");
  EXPECT_EQ(doc.at("codes")[0].at("value").get<double>(), std::ldexp(1.0, -127));
  EXPECT_EQ(doc.at("codes")[0xFE].at("value").get<double>(), std::ldexp(1.0, 127));
  EXPECT_EQ(doc.at("codes")[0xFF].at("value"), "nan");
  doc = run_json("formats show e3m2 --json -");
  EXPECT_EQ(doc.at("codes").size(), 64u);  // 6-bit format
  EXPECT_EQ(doc.at("codes")[0x1F].at("value").get<double>(), 28.0);
}

TEST(formats_cli, show_16_bit_gives_a_summary) {
  const auto doc = run_json("formats show bf16 --json -");
  const auto& s = doc.at("summary");
  auto row = [&](const std::string& what) -> const nlohmann::json& {
    for (const auto& r : s)
      if (r.at("what") == what) return r;
    throw std::runtime_error("no row " + what);
  };
  EXPECT_EQ(row("max finite").at("code"), "0x7F7F");
  EXPECT_EQ(row("inf").at("code"), "0x7F80");
  EXPECT_EQ(row("nan").at("value"), "nan");
  EXPECT_EQ(row("one").at("code"), "0x3F80");
  EXPECT_EQ(row("min subnormal").at("value").get<double>(), std::ldexp(1.0, -133));
}

TEST(formats_cli, unknown_format_is_exit_2_with_one_line_naming_it) {
  const auto r = run("formats show e9m9");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("e9m9"), std::string::npos);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

}  // namespace
