// CLI contract of `scan`: JSON and CSV from a generated checkpoint, --rank-by, the fnuz
// migration report, and bad inputs (exit 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "numprobe/base/rng.hpp"
#include "numprobe/io/safetensors.hpp"
#include "support/run_command.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using numprobe::testing::run_numprobe;

struct ckpt {
  fs::path dir = fs::temp_directory_path() / ("numprobe_cli_scan_" + std::to_string(::getpid()));
  std::string file;
  std::vector<float> a, b, norm;
  std::vector<std::uint8_t> fp8;
  ckpt() {
    fs::create_directories(dir);
    a.resize(32 * 128);
    b.resize(32 * 128);
    // +-{1, 0.5, 0.25} with a +-1 in every 16-wide block: exact in NVFP4 (see test_scan.cpp),
    // so only the outlier channel's blocks lose anything.
    const auto val = [](std::uint64_t stream, std::size_t i) {
      const double u = numprobe::uniform_open01(2, stream, i);
      const double mag = i % 16 == 0 ? 1.0 : (u < 1.0 / 3 ? 1.0 : u < 2.0 / 3 ? 0.5 : 0.25);
      return static_cast<float>(numprobe::uniform_open01(2, stream + 10, i) < 0.5 ? -mag : mag);
    };
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = val(1, i);
      b[i] = val(2, i);
    }
    for (int r = 0; r < 32; ++r) b[r * 128 + 9] = 300.f;  // an outlier channel
    norm.assign(128, 1.f);
    fp8 = {0x00, 0x80, 0x7E, 0x38, 0x7F};
    auto w8 = numprobe::io::tensor_of("model.layers.2.mlp.up_proj.weight", {5}, fp8);
    w8.dtype = numprobe::io::dtype::m_e4m3fn;
    file = (dir / "m.safetensors").string();
    numprobe::io::write_safetensors(
        file, {numprobe::io::tensor_of("model.layers.0.self_attn.v_proj.weight", {32, 128}, a),
               numprobe::io::tensor_of("model.layers.1.mlp.gate_proj.weight", {32, 128}, b),
               numprobe::io::tensor_of("model.norm.weight", {128}, norm), w8});
  }
  ~ckpt() { fs::remove_all(dir); }
};

TEST(cli_scan, json_ranks_the_outlier_tensor_first) {
  ckpt c;
  const auto r = run_numprobe("scan " + c.file + " --format nvfp4 --vs mxfp4,fp8-block128 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["command"], "scan");
  ASSERT_EQ(j["tensors"].size(), 2u);
  EXPECT_EQ(j["tensors"][0]["name"], "model.layers.1.mlp.gate_proj.weight");
  EXPECT_EQ(j["tensors"][0]["layer_type"], "gate_proj");
  EXPECT_EQ(j["tensors"][0]["layer"], 1);
  ASSERT_EQ(j["tensors"][0]["results"].size(), 3u);
  const auto& nv = j["tensors"][0]["results"][0];
  EXPECT_EQ(nv["scheme"], "nvfp4");
  EXPECT_EQ(nv["outlier_blocks"], 32);
  EXPECT_TRUE(nv["worst_block"]["outlier"].get<bool>());
  EXPECT_EQ(nv["worst_block"]["argmax"][1], 9);
  EXPECT_EQ(nv["flushed"], 32 * 15);
  EXPECT_GT(j["tensors"][1]["results"][0]["sqnr_db"].get<double>(), 100.0);  // exact up to s_t
  EXPECT_TRUE(j["totals"].contains("fp8-block128"));
  EXPECT_NEAR(j["totals"]["mxfp4"]["bits_per_param"].get<double>(), 4.25, 1e-9);
  EXPECT_EQ(j["skipped"].size(), 2u);  // the norm (not a matrix) and the fp8 tensor
  // Issue 17: ranked by the bulk error by default, with the flush-aware fields per scheme.
  EXPECT_EQ(j["rank_by"], "bulk");
  EXPECT_EQ(j["bulk_percentile"], 0.9);
  EXPECT_EQ(nv["flushed_frac"], 32.0 * 15 / (32 * 128));
  EXPECT_EQ(nv["outlier_flushed_frac"], 32.0 * 15 / (32 * 128));
  EXPECT_EQ(nv["rank_value"], nv["bulk_rel_rms"]);
  EXPECT_GT(nv["bulk_rel_rms"].get<double>(), 0.1);
  EXPECT_EQ(nv["output_rel_rms"], nv["rel_rms"]);
  EXPECT_EQ(j["tensors"][0]["bulk_below"], 1.0);  // p90 of +-{1, 0.5, 0.25} (and 300s)
}

TEST(cli_scan, rank_by_picks_the_order_and_is_recorded) {
  ckpt c;
  // Every key is recorded, and each result's rank_value is that key's field. The outlier tensor is
  // first by every key here, SQNR too: the other tensor is exact up to s_t's fp32 rounding.
  for (const auto& [key, field] : std::vector<std::pair<std::string, std::string>>{
           {"sqnr", "sqnr_db"}, {"flushed", "flushed_frac"}, {"outlier", "outlier_flushed_frac"},
           {"bulk", "bulk_rel_rms"}, {"output", "output_rel_rms"}}) {
    const auto r = run_numprobe("scan " + c.file + " --json - --rank-by " + key);
    ASSERT_EQ(r.exit_code, 0) << key << r.err;
    const auto j = json::parse(r.out);
    EXPECT_EQ(j["rank_by"], key);
    EXPECT_EQ(j["tensors"][0]["name"], "model.layers.1.mlp.gate_proj.weight") << key;
    for (const auto& t : j["tensors"]) EXPECT_EQ(t["results"][0]["rank_value"], t["results"][0][field]) << key;
  }
  const auto t = run_numprobe("scan " + c.file + " --rank-by outlier");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("by outlier_flushed_frac"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("outlier_fl_%*"), std::string::npos) << t.out;
  const auto md = run_numprobe("scan " + c.file + " --md -");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("by bulk_rel_rms"), std::string::npos) << md.out;
}

// The convention flags reach each scheme they name (issue 17): the NVFP4 axes the nvfp4 scan,
// --rule the MX one, and every result records what it ran under; a bad value exits 2.
TEST(cli_scan, conventions_apply_per_scheme_and_are_recorded) {
  ckpt c;
  const auto r = run_numprobe("scan " + c.file + " --format nvfp4 --vs mxfp4 --preset torchao --rule ceil --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  const auto& res = j["tensors"][0]["results"];
  EXPECT_EQ(res[0]["conventions"], "scale_division=reciprocal scale_floor=min-normal scale_arith=fp32");
  EXPECT_EQ(res[1]["conventions"], "rule=ceil");
  const auto d = json::parse(run_numprobe("scan " + c.file + " --format nvfp4 --vs mxfp4 --json -").out);
  EXPECT_EQ(d["tensors"][0]["results"][0]["conventions"], "scale_division=exact scale_floor=subnormal scale_arith=double");
  EXPECT_EQ(d["tensors"][0]["results"][1]["conventions"], "rule=floor");
  const auto bad = run_numprobe("scan " + c.file + " --scale-division halfway");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--scale-division"), std::string::npos) << bad.err;
}

TEST(cli_scan, text_and_csv) {
  ckpt c;
  const auto csv = (c.dir / "out.csv").string();
  const auto r = run_numprobe("scan " + c.file + " --vs mxfp4 --csv " + csv + " --top 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("model.layers.1.mlp.gate_proj.weight"), std::string::npos);
  EXPECT_NE(r.out.find("by layer type"), std::string::npos);
  std::ifstream in(csv);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto text = ss.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 2 * 2);  // header + 2 tensors x 2
  EXPECT_EQ(text.rfind("rank,tensor,", 0), 0u);
  EXPECT_NE(text.find("\n1,model.layers.1.mlp.gate_proj.weight,f32,32,128,gate_proj,1,nvfp4,"),
            std::string::npos);
}

// --act-stats (issue 17): the output error's fields and columns, the key rule, tensors without
// statistics ranked after, the fallback note without the file, and a length mismatch (exit 2).
TEST(cli_scan, act_stats_weight_the_output_ranking) {
  ckpt c;
  namespace io = numprobe::io;
  const auto stats = (c.dir / "act.safetensors").string();
  const std::string v = "model.layers.0.self_attn.v_proj.weight", g = "model.layers.1.mlp.gate_proj.weight";
  // Constant statistics (2, a power of two) weight every element alike: the output error is then
  // the isotropic one, output_rel_rms = rel_rms up to the sums' roundings (n = 4096 terms, a
  // relative 1e-12 is about 20 times their bound).
  io::write_safetensors(stats, {io::tensor_of("model.layers.1.mlp.gate_proj.input_sq_mean", {128},
                                              std::vector<float>(128, 2.0f))});
  const auto r = run_numprobe("scan " + c.file + " --act-stats " + stats + " --rank-by output --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["act_stats"], stats);
  EXPECT_EQ(j["without_act_stats"], json::array({v}));
  ASSERT_EQ(j["tensors"].size(), 2u);
  const auto& t0 = j["tensors"][0];
  EXPECT_EQ(t0["name"], g);
  EXPECT_EQ(t0["act_stats"], "model.layers.1.mlp.gate_proj.input_sq_mean");
  const auto& p = t0["results"][0];
  EXPECT_EQ(p["rank_value"], p["output_rel_rms"]);
  EXPECT_NEAR(p["output_rel_rms"].get<double>(), p["rel_rms"].get<double>(), 1e-12 * p["rel_rms"].get<double>());
  EXPECT_NEAR(p["output_sqnr_db"].get<double>(), p["sqnr_db"].get<double>(), 1e-9);
  EXPECT_GT(p["output_err"].get<double>(), 0.0);
  EXPECT_NEAR(p["output_err"].get<double>() / p["output_energy"].get<double>(),
              std::pow(p["output_rel_rms"].get<double>(), 2), 1e-12);
  EXPECT_TRUE(j["tensors"][1]["act_stats"].is_null());
  EXPECT_TRUE(j["tensors"][1]["results"][0]["output_err"].is_null());

  const auto text = run_numprobe("scan " + c.file + " --act-stats " + stats + " --rank-by output");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("out_sqnr_db*"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("1 without statistics (ranked after those with): " + v), std::string::npos) << text.out;
  const auto fallback = run_numprobe("scan " + c.file + " --rank-by output");
  ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_NE(fallback.out.find("without --act-stats"), std::string::npos) << fallback.out;
  EXPECT_EQ(fallback.out.find("out_sqnr_db"), std::string::npos) << fallback.out;

  io::write_safetensors(stats, {io::tensor_of(v, {127}, std::vector<float>(127, 1.0f))});
  const auto bad = run_numprobe("scan " + c.file + " --act-stats " + stats);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--act-stats"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("'" + v + "' holds 127 values, but '" + v + "' has 128 input channels"), std::string::npos)
      << bad.err;
}

TEST(cli_scan, fnuz_migration) {
  ckpt c;
  const auto r = run_numprobe("scan " + c.file + " --from e4m3fn --to e4m3fnuz --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  ASSERT_EQ(j["tensors"].size(), 1u);
  EXPECT_EQ(j["total"]["neg_zero_rewrites"], 1);
  EXPECT_EQ(j["total"]["clip_same_scale"], 1);  // 0x7E = 448
  EXPECT_EQ(j["total"]["nan_codes"], 1);
  EXPECT_EQ(j["total"]["amax"], 448.0);
}

TEST(cli_scan, bad_inputs_exit_2) {
  ckpt c;
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"scan " + c.file + " --filter '('", "--filter"},
           {"scan " + c.file + " --format nofmt", "nofmt"},
           {"scan /nonexistent/x.safetensors", "x.safetensors"},
           {"scan " + c.file + " --from e5m2 --to e4m3fnuz", "--from"},
           {"scan " + c.file + " --rank-by snr", "--rank-by"}}) {
    const auto r = run_numprobe(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

}  // namespace
