// NaN/Inf in a candidate is a finding (exit 1 with the report and the JSON), whatever the
// backend: exec, exec-worker, the emulator and dumped outputs; in O and in the LSE. Exit 3 stays
// for outputs that cannot be judged (wrong shape). Expected counts come from the case geometry,
// written out below, never from numprobe's own mask code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <unistd.h>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/reference/attention.hpp"
#include "providers/byok_test_support.hpp"
#include "support/run_command.hpp"

namespace numprobe {
namespace {

using json = nlohmann::json;
using testing::have_numpy;
using testing::python;
using testing::run_numprobe;
using testing::source_path;

// The geometry of one case, as the tests state it.
struct geometry {
  std::int64_t batch = 1, seq = 0, queries = 0, heads = 4, kv_heads = 2, head_dim = 32;
  std::int64_t window = 0;  // 0: causal
  std::string flags() const {
    std::string f = "--batch " + std::to_string(batch) + " --seq " + std::to_string(seq) +
                    " --queries " + std::to_string(queries) + " --heads " + std::to_string(heads) +
                    " --kv-heads " + std::to_string(kv_heads) + " --head-dim " + std::to_string(head_dim) +
                    " --rows all --seed 5";
    return f + (window ? " --mask window --window " + std::to_string(window) : " --mask causal");
  }
};

// Visible keys [begin, end) of query t: bottom-right aligned, query t at position S - T + t
// sees keys j <= pos, and with a window W also j > pos - W (examples/exec/README.md).
std::pair<std::int64_t, std::int64_t> visible(const geometry& g, std::int64_t t) {
  const std::int64_t pos = g.seq - g.queries + t;
  const std::int64_t end = std::clamp<std::int64_t>(pos + 1, 0, g.seq);
  const std::int64_t begin = g.window ? std::clamp<std::int64_t>(pos - g.window + 1, 0, end) : 0;
  return {begin, end};
}

std::string nonfinite_adapter(const std::string& mode) {
  return "\"exec:'" + python() + "' '" + source_path("tests/providers/adapters/nonfinite_adapter.py") +
         "' " + mode + " {in}\"";
}

std::string nonfinite_worker() {
  return "\"exec-worker:'" + python() + "' '" + source_path("examples/exec/worker.py") + "' '" +
         source_path("tests/providers/adapters/nonfinite_adapter.py") + "'\"";
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "no JSON written at " << path;
  if (!f) return json();
  auto j = json::parse(f, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

// ------------------------------------------------- a missing empty-row guard, every backend

struct guard_point {
  std::string name;
  std::string backend;  // "exec", "worker" or "emu"
  geometry g;
  std::int64_t tile_k;  // the kernel's key tile: rows whose first tile has no visible key go NaN
  bool lse_nan;         // the kernel's LSE is NaN on those rows too
};

class MissingEmptyRowGuard : public ::testing::TestWithParam<guard_point> {};

TEST_P(MissingEmptyRowGuard, IsJudgedWithTheRowsCountedAndClassified) {
  const auto& pt = GetParam();
  if (pt.backend != "emu" && !have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const geometry& g = pt.g;
  // Expected: the rows whose first key tile [0, tile_k) holds no visible key.
  std::int64_t masked = 0, edge = 0, first_query = -1;
  for (std::int64_t t = 0; t < g.queries; ++t) {
    const auto [b, e] = visible(g, t);
    if (e > b && b < pt.tile_k) continue;
    if (first_query < 0) first_query = t;
    (e > b ? edge : masked) += g.batch;
  }
  ASSERT_GT(masked + edge, 0) << "the case must have rows the bug reaches";
  const std::int64_t rows = masked + edge;

  const std::string dir = testing::fresh_dir("nonfinite_" + pt.name);
  const std::string json_path = dir + "/out.json";
  std::string cmd = "attention " + g.flags() + " --json " + json_path;
  if (pt.backend == "exec") cmd += " --backend " + nonfinite_adapter("tiled_no_guard:" + std::to_string(pt.tile_k));
  if (pt.backend == "worker") {
    ::setenv("NUMPROBE_TEST_NONFINITE_MODE", ("tiled_no_guard:" + std::to_string(pt.tile_k)).c_str(), 1);
    cmd += " --backend " + nonfinite_worker();
  }
  if (pt.backend == "emu") cmd += " --backend emu --inject no-empty-guard --tile 64x" + std::to_string(pt.tile_k);
  const auto r = run_numprobe(cmd);
  ::unsetenv("NUMPROBE_TEST_NONFINITE_MODE");
  ASSERT_EQ(r.exit_code, 1) << r.err << r.out;

  const json j = read_json(json_path);
  EXPECT_EQ(j["pass"], false);
  const json& nf = j["result"]["nonfinite"];
  // Every element of O of every head of those rows is NaN: rows x Hq x D.
  EXPECT_EQ(nf["nan"], rows * g.heads * g.head_dim) << nf.dump();
  EXPECT_EQ(j["result"]["nan_count"], rows * g.heads * g.head_dim);
  EXPECT_EQ(nf["inf"], 0);
  EXPECT_EQ(nf["lse_nan"], pt.lse_nan ? rows * g.heads : 0) << nf.dump();
  EXPECT_EQ(nf["lse_inf"], 0);
  EXPECT_EQ(nf["rows_by_kind"]["fully_masked"], masked);
  EXPECT_EQ(nf["rows_by_kind"]["window_edge"], edge);
  EXPECT_EQ(nf["rows_by_kind"]["ordinary"], 0);
  ASSERT_FALSE(nf["first"].empty());
  const json& f = nf["first"][0];
  EXPECT_EQ(f["batch"], 0);
  EXPECT_EQ(f["query"], first_query);
  EXPECT_EQ(f["row"], first_query);
  EXPECT_EQ(f["head"], 0);
  EXPECT_EQ(f["kind"], masked ? "fully-masked" : "window-edge");
  EXPECT_EQ(f["o_nan"], g.head_dim);

  // One prominent line in the text report, with the same numbers.
  std::string what = std::to_string(rows * g.heads * g.head_dim) + " NaN in O";
  if (pt.lse_nan) what += ", " + std::to_string(rows * g.heads) + " NaN in LSE";
  const std::string line = "NaN/Inf   " + what + " (rows: " + std::to_string(masked) +
                           " fully masked, " + std::to_string(edge) + " window edge, 0 ordinary), first at row " +
                           std::to_string(first_query) + " head 0";
  EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  std::filesystem::remove_all(dir);
}

std::vector<guard_point> guard_points() {
  // T > S causal: the first T - S rows of each batch member see no key. D = 32 and a key tile
  // of 48 (a third-party size, not a power of two) cross the 64-row sampling strata.
  geometry causal{2, 100, 150, 4, 2, 32, 0};
  // A sliding window over S = T = 300, W = 100: rows from t = 163 on have their window start at
  // key 64 or later, so a kernel that scans key tiles of 64 from key 0 meets an empty first tile.
  geometry window{1, 300, 300, 4, 2, 32, 100};
  return {
      {"exec_causal", "exec", causal, 48, true},
      {"worker_causal", "worker", causal, 48, true},
      {"exec_window", "exec", window, 64, true},
      {"worker_window", "worker", window, 64, true},
      // The emulator's fault: the same rows, the same counts and the same classification.
      {"emu_causal", "emu", causal, 64, true},
  };
}

INSTANTIATE_TEST_SUITE_P(Backends, MissingEmptyRowGuard, ::testing::ValuesIn(guard_points()),
                         [](const auto& info) { return info.param.name; });

// ------------------------------------------------- non-finite LSE with a correct O

struct lse_point {
  std::string mode;       // adapter mode; every 7th flat row, head r % Hq, gets the value
  bool worker;
  const char* field;      // which count it must land in
  const char* lse_state;  // how first[0] reports the value
};

class NonfiniteLse : public ::testing::TestWithParam<lse_point> {};

TEST_P(NonfiniteLse, IsAFindingEvenWithACorrectO) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const auto& pt = GetParam();
  const geometry g{1, 130, 130, 4, 2, 32, 0};  // causal T = S: every row sees key 0 on
  std::int64_t expected = 0;
  for (std::int64_t r = 0; r < g.batch * g.queries; r += 7) ++expected;
  const std::string mode = pt.mode + ":7";
  std::string backend = nonfinite_adapter(mode);
  if (pt.worker) {
    ::setenv("NUMPROBE_TEST_NONFINITE_MODE", mode.c_str(), 1);
    backend = nonfinite_worker();
  }
  const auto r = run_numprobe("attention " + g.flags() + " --backend " + backend + " --json -");
  ::unsetenv("NUMPROBE_TEST_NONFINITE_MODE");
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  const json& nf = j["result"]["nonfinite"];
  EXPECT_EQ(nf[pt.field], expected) << nf.dump();
  EXPECT_EQ(nf["total"], expected);
  EXPECT_EQ(nf["nan"], 0);
  EXPECT_EQ(nf["inf"], 0);
  EXPECT_EQ(j["result"]["kernel"][std::string(pt.field) == "lse_nan" ? "lse_nan_count" : "lse_inf_count"],
            expected);
  EXPECT_EQ(nf["rows_by_kind"]["ordinary"], expected);
  EXPECT_EQ(nf["first"][0]["lse_state"], pt.lse_state);
  EXPECT_EQ(nf["first"][1]["row"], 7);
  EXPECT_EQ(nf["first"][1]["head"], 7 % g.heads);
  // O itself is the float32-rounded reference: its error stays within float32's unit roundoff.
  EXPECT_LE(j["result"]["rel_rms"].get<double>(), std::ldexp(1.0, -24));
}

INSTANTIATE_TEST_SUITE_P(Modes, NonfiniteLse,
                         ::testing::Values(lse_point{"inf_lse", false, "lse_inf", "+inf"},
                                           lse_point{"minus_inf_lse", false, "lse_inf", "-inf"},
                                           lse_point{"nan_lse", false, "lse_nan", "nan"},
                                           lse_point{"inf_lse", true, "lse_inf", "+inf"}),
                         [](const auto& info) {
                           return info.param.mode + (info.param.worker ? "_worker" : "");
                         });

TEST(NonfiniteExec, AKernelWithoutLseIsNotAFinding) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const geometry g{1, 130, 150, 4, 2, 32, 0};  // T > S: fully masked rows, correctly guarded
  const auto r = run_numprobe("attention " + g.flags() + " --backend " + nonfinite_adapter("no_lse") + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["result"]["nonfinite"]["total"], 0);
  EXPECT_EQ(j["result"]["kernel"]["lse_known"], false);
}

TEST(NonfiniteExec, AWrongShapeIsStillABackendError) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const geometry g{1, 130, 130, 4, 2, 32, 0};
  const std::string dir = testing::fresh_dir("nonfinite_shape");
  const std::string backend = "\"exec:'" + python() + "' '" +
                              source_path("tests/providers/adapters/broken_adapter.py") + "' wrong_shape {in}\"";
  const auto r = run_numprobe("attention " + g.flags() + " --backend " + backend + " --json " + dir + "/out.json");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(o\.npy: shape \[130, 4, 33\] where \[130, 4, 32\] is expected)")))
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.json"));
  std::filesystem::remove_all(dir);
}

// ------------------------------------------------- a dumped candidate

TEST(NonfiniteDump, NanRowsAndAnInfiniteLseAreCountedAndClassified) {
  // T > S causal: rows 0..49 see no key. The dump leaves them NaN (O and LSE), as a kernel
  // without the empty-row guard writes them, and gives row 120 head 2 an LSE of +inf.
  const geometry g{1, 100, 150, 4, 2, 32, 0};
  const std::int64_t masked = g.queries - g.seq, bad_row = 120, bad_head = 2;
  attention_case c;
  c.seq = g.seq;
  c.queries = g.queries;
  c.heads = g.heads;
  c.kv_heads = g.kv_heads;
  c.head_dim = g.head_dim;
  c.dtype = formats::format_id::m_bf16;
  c.mask = mask_kind::m_causal;
  c.seed = 19;
  const std::string dir = testing::fresh_dir("nonfinite_dump");
  const attention_inputs in(c, false);
  const auto u = [](std::initializer_list<std::int64_t> s) { return std::vector<std::uint64_t>(s.begin(), s.end()); };
  const auto q = in.q_all();
  io::write_npy(dir + "/q.npy", u({g.queries, g.heads, g.head_dim}), std::vector<float>(q.begin(), q.end()));
  io::write_npy(dir + "/k.npy", u({g.seq, g.kv_heads, g.head_dim}), std::vector<float>(in.k().begin(), in.k().end()));
  io::write_npy(dir + "/v.npy", u({g.seq, g.kv_heads, g.head_dim}), std::vector<float>(in.v().begin(), in.v().end()));
  std::ofstream(dir + "/case.json") << json{{"seq", g.seq}, {"queries", g.queries}, {"heads", g.heads},
                                            {"kv_heads", g.kv_heads}, {"head_dim", g.head_dim},
                                            {"dtype", "bf16"}, {"mask", "causal"}, {"seed", 19}}
                                           .dump();
  std::vector<std::int64_t> rows(static_cast<std::size_t>(g.queries));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  const auto ref = reference::attention(c, q, rows, in.k(), in.v());
  std::vector<float> o(ref.o.begin(), ref.o.end()), lse(ref.lse.begin(), ref.lse.end());
  const auto hd = static_cast<std::size_t>(g.heads * g.head_dim);
  std::fill(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(masked * hd), std::nanf(""));
  std::fill(lse.begin(), lse.begin() + masked * g.heads, std::nanf(""));
  lse[static_cast<std::size_t>(bad_row * g.heads + bad_head)] = std::numeric_limits<float>::infinity();
  io::write_npy(dir + "/o.npy", u({g.queries, g.heads, g.head_dim}), o);
  io::write_npy(dir + "/lse.npy", u({g.queries, g.heads}), lse);

  const auto r = run_numprobe("attention --inputs " + dir + " --json " + dir + "/out.json");
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const json j = read_json(dir + "/out.json");
  const json& nf = j["result"]["nonfinite"];
  EXPECT_EQ(nf["nan"], masked * g.heads * g.head_dim) << nf.dump();
  EXPECT_EQ(nf["lse_nan"], masked * g.heads);
  EXPECT_EQ(nf["lse_inf"], 1);
  EXPECT_EQ(nf["rows_by_kind"]["fully_masked"], masked);
  EXPECT_EQ(nf["rows_by_kind"]["window_edge"], 0);
  EXPECT_EQ(nf["rows_by_kind"]["ordinary"], 1);
  EXPECT_NE(r.out.find("NaN/Inf   6400 NaN in O, 200 NaN in LSE, 1 Inf in LSE (rows: 50 fully masked, "
                       "0 window edge, 1 ordinary), first at row 0 head 0"),
            std::string::npos)
      << r.out;
  // The same dump with the +inf alone (O and the other LSE values correct) still fails.
  std::copy(ref.o.begin(), ref.o.end(), o.begin());
  std::copy(ref.lse.begin(), ref.lse.end(), lse.begin());
  lse[static_cast<std::size_t>(bad_row * g.heads + bad_head)] = std::numeric_limits<float>::infinity();
  io::write_npy(dir + "/o.npy", u({g.queries, g.heads, g.head_dim}), o);
  io::write_npy(dir + "/lse.npy", u({g.queries, g.heads}), lse);
  const auto r2 = run_numprobe("attention --inputs " + dir + " --json -");
  ASSERT_EQ(r2.exit_code, 1) << r2.err;
  const json j2 = json::parse(r2.out);
  EXPECT_EQ(j2["result"]["nonfinite"]["total"], 1);
  EXPECT_EQ(j2["result"]["nonfinite"]["first"][0]["row"], bad_row);
  EXPECT_EQ(j2["result"]["nonfinite"]["first"][0]["head"], bad_head);
  // And with the correct LSE written back, the dump passes: the finding was the +inf alone.
  lse[static_cast<std::size_t>(bad_row * g.heads + bad_head)] = static_cast<float>(
      ref.lse[static_cast<std::size_t>(bad_row * g.heads + bad_head)]);
  io::write_npy(dir + "/lse.npy", u({g.queries, g.heads}), lse);
  EXPECT_EQ(run_numprobe("attention --inputs " + dir + " --json -").exit_code, 0);
  std::filesystem::remove_all(dir);
}

// Issue 27 item 5: softmax and quant through exec, as attention: NaN in the output is exit 1
// with the report written (exit_code 1 in the JSON), not a backend error (exit 3).
TEST(cli_nonfinite, softmax_and_quant_exec_nan_is_exit_1_with_a_report) {
  const std::string dir = ::testing::TempDir() + "numprobe_exec_nan_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const auto sm = run_numprobe("softmax --vocab 1025 --rows 3 --backend \"exec:'" + python() + "' '" +
                               source_path("tests/providers/adapters/broken_softmax_adapter.py") +
                               "' nan {in}\" --json " + dir + "/sm.json");
  EXPECT_EQ(sm.exit_code, 1) << sm.out << sm.err;
  EXPECT_EQ(read_json(dir + "/sm.json")["exit_code"], 1);
  const auto q = run_numprobe("quant --scheme fp8-act1x128 --shape 130x300 --backend \"exec:'" + python() + "' '" +
                              source_path("tests/providers/adapters/broken_quant_adapter.py") +
                              "' nan {in}\" --json " + dir + "/q.json");
  EXPECT_EQ(q.exit_code, 1) << q.out << q.err;
  EXPECT_EQ(read_json(dir + "/q.json")["exit_code"], 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace numprobe
