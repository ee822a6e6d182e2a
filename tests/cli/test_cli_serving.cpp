// CLI contract of the serving-numerics commands (issue 9): `bisect` with fp8 knobs (fp8_points,
// culprit), `drift --decode` with --splits/--page-size lists (series[], per-point splits and
// page_size), `kvcache` (points[], summary), and their bad-input exits.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/run_command.hpp"

using numprobe::testing::run_numprobe;
using json = nlohmann::json;

namespace {

json parse_or_fail(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text.substr(0, 400);
  return j;
}

TEST(cli_serving, bisect_names_the_fp8_point) {
  // kv-scale-ignored: the cache's codes are read as if the scale were 1. Bound: e4m3fnuz's unit
  // roundoff 2^-4, which a healthy fp8 cache keeps.
  const auto r = run_numprobe("bisect --backend emu --heads 2 --kv-heads 1 --head-dim 64 --mask none --rows 16 "
                              "--seq 64..1024 --kv-format e4m3fnuz --kv-scale head --inject kv-scale-ignored "
                              "--bound 'rel_rms<=0.0625' --json -");
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["fp8_points"]["verdict"], "one");
  EXPECT_EQ(j["fp8_points"]["culprit"], json::array({"kv"}));
  EXPECT_EQ(j["culprit"]["kind"], "fp8_point");
  EXPECT_EQ(j["classification"], "fp8 scaling");
  EXPECT_TRUE(j["decode"]["ran"] == false);
}

TEST(cli_serving, drift_decode_sweeps_splits_and_pages) {
  const auto r = run_numprobe("drift --backend emu --decode --queries 4 --heads 4 --kv-heads 2 --head-dim 32 "
                              "--seq 1..129 --points 3,16,17,64,65,128,129 --splits 1,4 --page-size 16,64 "
                              "--inject lse-base2-merge --bound 'ratio_to_naive<=2' --no-e2e --json -");
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const auto j = parse_or_fail(r.out);
  ASSERT_EQ(j["series"].size(), 4u);
  ASSERT_EQ(j["points"].size(), 4u * 7u);
  for (const auto& s : j["series"]) {
    // A base-2 LSE fed to the merge: harmless with one split, wrong with several.
    if (s["splits"] == 1) EXPECT_TRUE(s["pass"].get<bool>()) << s.dump();
    else EXPECT_FALSE(s["pass"].get<bool>()) << s.dump();
  }
  for (const auto& p : j["points"]) {
    EXPECT_TRUE(p.contains("splits"));
    EXPECT_TRUE(p.contains("page_size"));
    EXPECT_EQ(p["seq_mod_page"], p["seq"].get<int>() % p["page_size"].get<int>());
  }
  for (const auto& b : j["breaches"]) EXPECT_NE(b["splits"], 1);
  // CSV: splits and page size lead each row.
  const std::string csv = ::testing::TempDir() + "/drift_decode.csv";
  const auto rc = run_numprobe("drift --backend emu --decode --queries 2 --heads 2 --kv-heads 1 --head-dim 32 "
                               "--seq 1..65 --points 16,65 --splits 1,2 --no-e2e --csv " + csv);
  ASSERT_EQ(rc.exit_code, 0) << rc.err;
  std::ifstream in(csv);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  EXPECT_EQ(header.rfind("splits,page_size,case,seq", 0), 0u) << header;
  EXPECT_EQ(row.rfind("1,0,", 0), 0u) << row;
}

TEST(cli_serving, kvcache_reports_clipping_and_rounding) {
  const auto r = run_numprobe("kvcache --seq 256,2048 --kv-format e4m3fn --kv-scale tensor,token --scale-mult 1,2^-2 "
                              "--heads 2 --kv-heads 1 --head-dim 32 --queries 2 --calib 256 --outlier-after 1024 "
                              "--outlier-rate 4e-3 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;  // no --bound given: a study, not a gate
  const auto j = parse_or_fail(r.out);
  EXPECT_EQ(j["command"], "kvcache");
  ASSERT_EQ(j["points"].size(), 2u * 2u * 2u);
  for (const auto& p : j["points"]) {
    for (const char* t : {"k", "v"}) {
      const double c = p[t]["clip_rel_rms"], rr = p[t]["round_rel_rms"], tot = p[t]["rel_rms"];
      EXPECT_NEAR(tot * tot, c * c + rr * rr, 1e-12 + 1e-9 * tot * tot);  // an element clips or rounds
    }
    EXPECT_TRUE(p["out"].contains("clip_rel_rms"));
    EXPECT_TRUE(p["dominant"] == "clipping" || p["dominant"] == "rounding");
  }
  EXPECT_TRUE(j["summary"].contains("driver"));
  EXPECT_FALSE(j["outliers"]["positions"].empty());
  // Human table.
  const auto t = run_numprobe("kvcache --seq 256,2048 --kv-format e4m3fn --kv-scale tensor --scale-mult 1 "
                              "--heads 2 --kv-heads 1 --head-dim 32 --queries 2 --calib 256 --outlier-after 1024 "
                              "--outlier-rate 4e-3");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("summary"), std::string::npos);
}

TEST(cli_serving, bad_input_exits_2_with_one_line) {
  for (const std::string args :
       {"kvcache --kv-format bf16", "kvcache --kv-scale diagonal", "kvcache --scale-mult 0",
        "kvcache --scale-mult abc", "kvcache --seq 0", "kvcache --outlier-rate 2", "kvcache --seq 1,,2",
        "attention --decode --splits 1,2", "drift --splits 2,4", "drift --decode --splits 2,2",
        "drift --decode --page-size 0"}) {
    const auto r = run_numprobe(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

}  // namespace
