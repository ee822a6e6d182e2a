// The real binary: `attention --inputs DIR --candidate O.npy` judges a dump; exec failures exit 3
// and a drift sweep reports the failed point and goes on.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "byok_test_support.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/reference/attention.hpp"
#include "support/run_command.hpp"

namespace numprobe {
namespace {

using testing::run_numprobe;

std::vector<std::uint64_t> u(std::initializer_list<std::int64_t> s) {
  return {s.begin(), s.end()};
}

// A dump as another engine would write it: case.json with the CLI's names (no case id),
// q/k/v as float32, and a candidate output equal to the reference except one (row, head).
struct dump {
  std::string dir;
  attention_case c;
  std::int64_t bad_row = 70;
  std::int64_t bad_head = 1;
};

dump write_dump(const std::string& name, bool nan) {
  dump d;
  d.dir = testing::fresh_dir(name);
  d.c.seq = 200;
  d.c.queries = 100;
  d.c.heads = 4;
  d.c.kv_heads = 2;
  d.c.head_dim = 32;
  d.c.dtype = formats::format_id::m_bf16;
  d.c.mask = mask_kind::m_causal;
  d.c.seed = 11;
  const attention_inputs in(d.c, false);
  const auto q = in.q_all();
  io::write_npy(d.dir + "/q.npy", u({d.c.t(), d.c.heads, d.c.head_dim}), std::vector<float>(q.begin(), q.end()));
  io::write_npy(d.dir + "/k.npy", u({d.c.seq, d.c.kv_heads, d.c.head_dim}),
                std::vector<float>(in.k().begin(), in.k().end()));
  io::write_npy(d.dir + "/v.npy", u({d.c.seq, d.c.kv_heads, d.c.head_dim}),
                std::vector<float>(in.v().begin(), in.v().end()));
  nlohmann::json j = {{"seq", 200}, {"queries", 100}, {"heads", 4}, {"kv_heads", 2},
                      {"head_dim", 32}, {"dtype", "bf16"}, {"mask", "causal"}, {"seed", 11}};
  std::ofstream(d.dir + "/case.json") << j.dump();
  std::vector<std::int64_t> rows(static_cast<std::size_t>(d.c.t()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  auto ref = reference::attention(d.c, q, rows, in.k(), in.v());
  std::vector<float> o(ref.o.begin(), ref.o.end());
  for (std::int64_t dd = 0; dd < d.c.head_dim; ++dd)
    o[static_cast<std::size_t>((d.bad_row * d.c.heads + d.bad_head) * d.c.head_dim + dd)] += 0.01f;
  if (nan) o[5] = std::nanf("");
  io::write_npy(d.dir + "/engine_o.npy", u({d.c.t(), d.c.heads, d.c.head_dim}), o);
  return d;
}

TEST(CliDumpedInputs, JudgesADumpAndPlacesTheWorstRowOnTiles) {
  const auto d = write_dump("dump", false);
  const auto r = run_numprobe("attention --inputs " + d.dir + " --candidate " + d.dir +
                              "/engine_o.npy --tile 64x32 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& res = j["result"];
  EXPECT_EQ(res["case"], d.c.id());
  EXPECT_EQ(res["rows_evaluated"], 100);
  const auto& w = res["worst_rows"][0];
  EXPECT_EQ(w["row"], d.bad_row);
  EXPECT_EQ(w["head"], d.bad_head);
  EXPECT_EQ(w["query_tile"], d.bad_row / 64);
  // Bottom-right causal: row 70 of T=100 over S=200 sees keys [0, 171), last key 170 in tile 5.
  EXPECT_EQ(w["keys"], 171);
  EXPECT_EQ(w["key_tile"], 170 / 32);
  // The other rows are the reference rounded to float32: the perturbed row is the worst by far.
  EXPECT_GT(w["rel_rms"].get<double>(), 1e-3);
  EXPECT_LT(res["worst_rows"][1]["rel_rms"].get<double>(), 1e-6);
  // Text report: worst rows with tile columns; a bound breach exits 1.
  const auto t = run_numprobe("attention --inputs " + d.dir + " --candidate " + d.dir +
                              "/engine_o.npy --bound 'rel_rms<=1e-6'");
  EXPECT_EQ(t.exit_code, 1) << t.err;
  EXPECT_NE(t.out.find("q_tile"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("tile 64x64 assumed"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("FAIL rel_rms<=1e-06"), std::string::npos) << t.out;
  std::filesystem::remove_all(d.dir);
}

TEST(CliDumpedInputs, NanInTheDumpIsAFindingNotACrash) {
  const auto d = write_dump("dump_nan", true);
  const auto r = run_numprobe("attention --inputs " + d.dir + " --candidate " + d.dir + "/engine_o.npy");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("the candidate output holds NaN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL nonfinite<=0"), std::string::npos) << r.out;
  std::filesystem::remove_all(d.dir);
}

TEST(CliDumpedInputs, BadDumpsAreInputErrors) {
  const auto d = write_dump("dump_bad", false);
  auto r = run_numprobe("attention --inputs " + d.dir + " --candidate " + d.dir + "/nope.npy");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("nope.npy"), std::string::npos) << r.err;
  std::filesystem::remove(d.dir + "/k.npy");
  r = run_numprobe("attention --inputs " + d.dir + " --candidate " + d.dir + "/engine_o.npy");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("k.npy"), std::string::npos) << r.err;
  std::filesystem::remove_all(d.dir);
}

std::string broken(const std::string& mode, const std::string& seq = "") {
  return "\"exec:'" + testing::python() + "' '" +
         testing::source_path("tests/providers/adapters/broken_adapter.py") + "' " + mode +
         " {in} " + seq + "\"";
}

TEST(CliExec, FailingCommandExits3WithItsStderr) {
  if (!testing::have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const auto r = run_numprobe("attention --seq 64 --heads 2 --kv-heads 1 --head-dim 16 --backend " +
                              broken("crash"));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("adapter crashed on purpose"), std::string::npos) << r.err;
}

TEST(CliExec, DriftGoesOnPastAFailedPointAndExits3) {
  if (!testing::have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const auto r = run_numprobe("drift --seq 64..66 --points 64,65,66 --heads 2 --kv-heads 1 "
                              "--head-dim 16 --backend " + broken("wrong_shape", "65") + " --json -");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["points"].size(), 2u);
  ASSERT_EQ(j["point_errors"].size(), 1u);
  EXPECT_EQ(j["point_errors"][0]["seq"], 65);
}

TEST(CliExec, NumpyAdapterThroughTheCli) {
  if (!testing::have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const std::string adapter = "\"exec:'" + testing::python() + "' '" +
                              testing::source_path("examples/exec/numpy_reference.py") + "' {in}\"";
  // Basis: float32 output of a float64 computation, rel_rms <= 2^-24 = 5.96e-08.
  const auto r = run_numprobe("attention --seq 100 --queries 30 --heads 4 --kv-heads 2 --head-dim 32 "
                              "--backend " + adapter + " --bound 'rel_rms<=5.97e-8'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS rel_rms<=5.97e-08"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace numprobe
