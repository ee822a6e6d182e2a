// `numprobe quant` end to end: the real binary, its JSON, its dump files and its exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "numprobe/io/npy.hpp"

namespace {

struct run_result {
  int code = -1;
  std::string out;
};

run_result run(const std::string& args) {
  const std::string cmd = std::string(NUMPROBE_BINARY_DIR) + "/numprobe quant " + args + " 2>&1";
  run_result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("numprobe_quant_" + name + "_" +
                                                     std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// The MX block of test_scheme_mx_nvfp4.cpp's clipping case, but with a NaN and an inf added
// in a second block: x = {60, 10.4, 20, -1.6, 2, 2.4, -44, 36} then 0.5 x 8 = 4 repeated.
std::vector<double> mx_input() {
  std::vector<double> x = {60, 10.4, 20, -1.6, 2, 2.4, -44, 36};
  while (x.size() < 64) x.push_back(4.0);
  x[40] = std::numeric_limits<double>::quiet_NaN();
  x[41] = std::numeric_limits<double>::infinity();
  return x;
}

}  // namespace

TEST(quant_cli, json_of_a_synthetic_nvfp4_case) {
  const auto r = run("--scheme nvfp4 --shape 64x256 --dist outliers --seed 7 --json -");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["tool"], "numprobe");
  EXPECT_EQ(j["case"], "quant(M=64,N=256,fmt=e2m1,scheme=nvfp4,dist=outliers,seed=7)");
  // 64 x 256 / 16 = 1024 blocks; bits = 4 + 8/16 + 32/(64 x 256).
  EXPECT_EQ(j["blocks"], 1024);
  EXPECT_DOUBLE_EQ(j["bits_per_element"].get<double>(), 4.5 + 32.0 / 16384.0);
  for (const char* k : {"sqnr_db", "rel_rms", "flushed", "clipped", "outlier_blocks",
                        "bits_per_element", "worst_blocks", "worked_block"})
    EXPECT_TRUE(j.contains(k)) << k;
  // fp4 with 16-element blocks: SQNR of normal data sits near 20 dB (e2m1 has 1 mantissa bit);
  // a working quantizer is above 10 and below 30.
  EXPECT_GT(j["sqnr_db"].get<double>(), 10.0);
  EXPECT_LT(j["sqnr_db"].get<double>(), 30.0);
  // One element in 1000 is x100: with 16384 elements some blocks hold one, and an outlier of
  // ~100 sigma flushes every N(0,1) neighbour below 100/24 -> outlier blocks exist, and every
  // outlier flush is a flush.
  EXPECT_GT(j["outlier_blocks"].get<int>(), 0);
  EXPECT_LE(j["outlier_flushed"].get<int>(), j["flushed"].get<int>());
  const auto& w = j["worst_blocks"][0];
  EXPECT_GE(w["outlier_flushed"].get<int>(), 1);
  EXPECT_EQ(j["worked_block"]["index"], w["index"]);
}

TEST(quant_cli, mx_block_from_npy_with_dump_and_nonfinite_inputs) {
  const auto dir = temp_dir("mx");
  const std::vector<std::uint64_t> shape = {1, 64};
  numprobe::io::write_npy(dir / "x.npy", shape, mx_input());
  // NaN/Inf inputs fail by default (issue 15) and pass only with --allow-nonfinite.
  const auto refused = run("--scheme mxfp4 --input " + (dir / "x.npy").string());
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_NE(refused.out.find("NON-FINITE"), std::string::npos) << refused.out;
  const auto r = run("--scheme mxfp4 --allow-nonfinite --input " + (dir / "x.npy").string() + " --dump " +
                     (dir / "dump").string() + " --json -");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  // Block 0 (hand-derived in test_scheme_mx_nvfp4.cpp): X = 3; 60 clips (7.5 > 6); -1.6 and 2
  // flush. Block 1: amax 4 (the inf is excluded), X = 2 - 2 = 0, 4 codes exactly.
  EXPECT_EQ(j["clipped"], 1);
  EXPECT_EQ(j["flushed"], 2);
  EXPECT_EQ(j["nan_inputs"], 1);
  EXPECT_EQ(j["inf_inputs"], 1);
  const auto codes = numprobe::io::read_npy(dir / "dump" / "codes.npy").to_doubles();
  const auto scales = numprobe::io::read_npy(dir / "dump" / "scales.npy").to_doubles();
  ASSERT_EQ(codes.size(), 64u);
  ASSERT_EQ(scales.size(), 2u);
  EXPECT_EQ(scales[0], 130.0);  // e8m0 code of 2^3
  EXPECT_EQ(scales[1], 127.0);  // 2^0
  EXPECT_EQ(codes[0], 7.0);     // 6 (clipped)
  EXPECT_EQ(codes[2], 4.0);     // 2.5 -> 2 (tie to even)
  EXPECT_EQ(codes[41], 7.0);    // +inf saturates to 6
  const auto dq = numprobe::io::read_npy(dir / "dump" / "dequant.npy").to_doubles();
  EXPECT_EQ(dq[0], 48.0);
  EXPECT_TRUE(std::isnan(dq[40]));
  std::filesystem::remove_all(dir);
}

TEST(quant_cli, terminal_output_has_the_table_and_a_worked_block) {
  const auto r = run("--scheme nvfp4 --shape 16x64 --dist outliers --seed 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("sqnr_db"), std::string::npos);
  EXPECT_NE(r.out.find("outlier_blocks"), std::string::npos);
  EXPECT_NE(r.out.find("worked block"), std::string::npos);
  EXPECT_NE(r.out.find("sets the scale"), std::string::npos);
}

TEST(quant_cli, bounds_gate_with_exit_1) {
  // mxfp8 (e4m3, 3 mantissa bits) of normal data: SQNR near 31 dB; >= 100 cannot hold, >= 10
  // must.
  EXPECT_EQ(run("--scheme mxfp8 --shape 8x64 --dist normal --bound 'sqnr_db>=100'").code, 1);
  EXPECT_EQ(run("--scheme mxfp8 --shape 8x64 --dist normal --bound 'sqnr_db>=10'").code, 0);
}

TEST(quant_cli, input_errors_exit_2_with_one_line) {
  for (const char* args : {"--scheme nope --shape 8x64", "--scheme mxfp4 --shape 8xZ",
                           "--scheme mxfp4 --shape 8x64 --format e9m9",
                           "--scheme mxfp4 --shape 8x64 --rule up",
                           "--scheme mxfp4 --shape 8x64 --bound 'nosuch<=1'",
                           "--scheme int4-awq --shape 8x64 --format e2m1",
                           "--scheme mxfp4 --input /nonexistent/x.npy",
                           // 10^12 elements: ~26 TiB for the element-wise analysis, more than
                           // any machine this runs on; refused before allocating, naming scan.
                           "--scheme nvfp4 --shape 1000000x1000000"}) {
    const auto r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << "\n" << r.out;
  }
  EXPECT_NE(run("--scheme nvfp4 --shape 1000000x1000000").out.find("numprobe scan"), std::string::npos);
  const auto dir = temp_dir("shape");
  const std::vector<std::uint64_t> shape = {1, 64};
  numprobe::io::write_npy(dir / "x.npy", shape, mx_input());
  EXPECT_EQ(run("--scheme mxfp4 --shape 8x9 --input " + (dir / "x.npy").string()).code, 2);
  std::filesystem::remove_all(dir);
}

namespace {

// The conventions (docs/quant-conventions.md): recorded in the JSON and the terminal line, a
// preset overridden by an axis flag, the case id naming non-default axes, and unknown or misplaced values refused by name.
TEST(quant_cli, conventions_are_recorded_and_refused_by_name) {
  const auto r = run("--scheme nvfp4 --shape 16x64 --preset torchao --scale-floor subnormal --json -");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["conventions"]["scale_division"], "reciprocal");
  EXPECT_EQ(j["conventions"]["scale_floor"], "subnormal");
  EXPECT_EQ(j["conventions"]["scale_arith"], "fp32");
  EXPECT_EQ(j["case"], "quant(M=16,N=64,fmt=e2m1,scheme=nvfp4,division=reciprocal,arith=fp32,dist=llm,seed=7)");
  const auto d = nlohmann::json::parse(run("--scheme nvfp4 --shape 16x64 --json -").out);
  EXPECT_EQ(d["conventions"]["scale_division"], "exact");
  const auto mx = nlohmann::json::parse(run("--scheme mxfp4 --shape 16x64 --rule even --json -").out);
  EXPECT_EQ(mx["conventions"]["rule"], "even");
  const auto t = run("--scheme nvfp4 --shape 16x64 --scale-division reciprocal-approx");
  EXPECT_NE(t.out.find("conventions scale_division=reciprocal-approx scale_floor=subnormal scale_arith=double"),
            std::string::npos) << t.out;
  const auto bad = run("--scheme nvfp4 --shape 16x64 --scale-floor none");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("--scale-floor: unknown value 'none' (known: subnormal, min-normal)"), std::string::npos) << bad.out;
  const auto wrong = run("--scheme mxfp4 --shape 16x64 --scale-division reciprocal");
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.out.find("--scale-division: reciprocal applies to nvfp4 only"), std::string::npos) << wrong.out;
  // The GPU kernels implement every axis (tests/gpu/test_gpu_quantize.cpp): without them or
  // without a device the backend is missing (exit 3); with both the codes are checked.
  const auto gpu = run("--scheme nvfp4 --shape 16x64 --scale-arith fp32 --backend cuda");
  if (gpu.code != 3) {
    EXPECT_EQ(gpu.code, 0) << gpu.out;
    EXPECT_NE(gpu.out.find("bit-exact with the reference codec"), std::string::npos) << gpu.out;
  }
}

// e8m0 as a plain cast: codes as ml_dtypes float8_e8m0fnu gives them (tests/formats/
// test_conventions.cpp holds the values); a scaled e8m0 element is refused.
TEST(quant_cli, e8m0_plain_cast_target) {
  const auto r = run("--format e8m0 --scheme none --shape 4x64 --overflow nan --allow-nonfinite --json -");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["format"], "e8m0");
  const auto bad = run("--format e8m0 --scheme mxfp4 --shape 4x64");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("e8m0 elements take --scheme none only"), std::string::npos) << bad.out;
}

}  // namespace
