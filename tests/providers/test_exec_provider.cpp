// `--backend exec:CMD` and the worker protocol, through the provider registry and the probes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>

#include "byok_test_support.hpp"
#include "numprobe/base/error.hpp"
#include "probes/point/attention_probe.hpp"
#include "probes/attention/drift_probe.hpp"
#include "src/providers/exec_provider_process.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

using testing::have_numpy;
using testing::python;
using testing::source_path;

std::string numpy_adapter(const std::string& extra = "") {
  return "exec:'" + python() + "' '" + source_path("examples/exec/numpy_reference.py") + "' {in}" + extra;
}

std::string broken_adapter(const std::string& mode, const std::string& seq = "") {
  return "exec:'" + python() + "' '" + source_path("tests/providers/adapters/broken_adapter.py") +
         "' " + mode + " {in} " + seq;
}

std::string worker_backend() {
  return "exec-worker:'" + python() + "' '" + source_path("examples/exec/worker.py") + "' '" +
         source_path("tests/providers/adapters/worker_adapter.py") + "'";
}

attention_case small_case() {
  attention_case c;
  c.seq = 130;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.dtype = formats::format_id::m_bf16;
  c.mask = mask_kind::m_causal;
  return c;
}

probes::attention_probe_options all_rows() {
  probes::attention_probe_options po;
  po.sampling.max_rows = 0;
  return po;
}

// ---------------------------------------------------------------- the NumPy adapter passes

struct numpy_point {
  attention_case c;
  std::string adapter_flags;
  // Basis: the adapter computes in float64 and rounds O once to its output dtype, so every
  // element's relative error is at most that dtype's unit roundoff u, and so is the RMS
  // ratio: u32 = 2^-24 for float32 output. For float64 output the bound is the reference's own
  // proven 1e-12 (DESIGN.md). LSE is written in float64: |error| far below 1e-10 nats.
  double rel_rms_bound;
};

std::string point_name(const ::testing::TestParamInfo<numpy_point>& info) {
  return std::regex_replace(info.param.c.id(), std::regex("[^A-Za-z0-9]+"), "_");
}

class NumpyAdapter : public ::testing::TestWithParam<numpy_point> {};

TEST_P(NumpyAdapter, MatchesReferenceWithinOutputRounding) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const auto& pt = GetParam();
  provider_options o;
  o.backend = numpy_adapter(pt.adapter_flags);
  auto prov = make_attention_provider(o);
  EXPECT_FALSE(prov->computes_row_subsets());
  const auto p = probes::run_attention_point(*prov, pt.c, all_rows());
  EXPECT_EQ(p.kernel.nan_count, 0);
  EXPECT_LE(p.kernel.rel_rms, pt.rel_rms_bound) << p.case_id;
  EXPECT_GT(p.kernel.rel_rms, 0.0);  // the adapter really ran: its f32 output is not the reference
  EXPECT_LE(p.kernel.lse_max_abs, 1e-10);
  EXPECT_EQ(p.kernel.lse_mismatch_inf, 0);
}

std::vector<numpy_point> numpy_points() {
  std::vector<numpy_point> v;
  const double u32 = std::ldexp(1.0, -24);
  attention_case c = small_case();
  v.push_back({c, "", u32});
  c.queries = 37;  // T != S: bottom-right alignment must agree
  v.push_back({c, "", u32});
  c = small_case();
  c.batch = 2;  // batch concatenated along the first axis
  c.mask = mask_kind::m_window;
  c.window = 17;
  c.softcap = 5.0;
  v.push_back({c, "", u32});
  c = small_case();
  c.queries = 150;
  c.mask = mask_kind::m_causal_top_left;  // T > S top-left: every row sees key 0
  v.push_back({c, "", u32});
  c.mask = mask_kind::m_causal;  // T > S bottom-right: the first 20 rows see no key (O = 0)
  v.push_back({c, "", u32});
  c = small_case();
  c.dtype = formats::format_id::m_f64;
  c.heads = 3;
  c.kv_heads = 1;
  v.push_back({c, " --out-dtype float64", 1e-12});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, NumpyAdapter, ::testing::ValuesIn(numpy_points()), point_name);

// ---------------------------------------------- broken adapters: right error, sweep goes on

struct broken_mode {
  std::string mode;
  std::string expect;  // regex the error message must match
};

class BrokenAdapter : public ::testing::TestWithParam<broken_mode> {};

TEST_P(BrokenAdapter, GivesItsErrorAndTheSweepGoesOn) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const auto& m = GetParam();
  const std::string tmp = testing::fresh_dir("broken_" + m.mode);
  ::setenv("TMPDIR", tmp.c_str(), 1);

  provider_options o;
  o.backend = broken_adapter(m.mode, "65");
  o.exec_timeout_s = m.mode == "hang" ? 1.0 : 60.0;
  auto prov = make_attention_provider(o);
  probes::drift_options d;
  d.base = small_case();
  d.base.mask = mask_kind::m_none;
  d.seq_lo = 64;
  d.seq_hi = 66;
  d.points = "64,65,66";
  d.probe.sampling.max_rows = 16;
  const auto r = probes::run_drift(*prov, d);
  ASSERT_EQ(r.point_errors.size(), 1u);
  EXPECT_EQ(r.point_errors[0].seq, 65);
  EXPECT_TRUE(std::regex_search(r.point_errors[0].message, std::regex(m.expect)))
      << r.point_errors[0].message;
  ASSERT_EQ(r.points.size(), 2u);  // 64 and 66 ran and pass
  EXPECT_EQ(r.points[0].seq, 64);
  EXPECT_EQ(r.points[1].seq, 66);
  for (const auto& p : r.points) EXPECT_LE(p.kernel.rel_rms, std::ldexp(1.0, -24));
  EXPECT_EQ(to_json(r)["point_errors"].size(), 1u);

  // The same case alone: a backend error (exit 3) naming the case.
  attention_case c = d.base;
  c.seq = 65;
  try {
    (void)probes::run_attention_point(*prov, c, d.probe);
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend);
    EXPECT_NE(std::string(e.what()).find(c.id()), std::string::npos) << e.what();
  }
  // Temporary directories are gone (no --keep).
  EXPECT_EQ(testing::count_entries(tmp), 0u);
  ::unsetenv("TMPDIR");
  std::filesystem::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, BrokenAdapter,
    ::testing::Values(
        broken_mode{"crash", "exited with status 7; last output lines: adapter crashed on purpose"},
        broken_mode{"segv", "killed by signal 11"},
        broken_mode{"hang", "timed out after 1 s .*process group"},
        broken_mode{"wrong_shape", "o\\.npy: shape \\[65, 4, 33\\] where \\[65, 4, 32\\] is expected"},
        broken_mode{"wrong_dtype", "dtype i32 is not float32"},
        // "nan" is not here: NaN in o.npy is a finding (exit 1), tests/cli/test_cli_nonfinite.cpp.
        broken_mode{"garbage", "not a readable \\.npy file"},
        broken_mode{"missing", "the kernel wrote no o\\.npy"}),
    [](const auto& info) { return info.param.mode; });

TEST(ExecProvider, KeepLeavesTheCaseDirectory) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const std::string tmp = testing::fresh_dir("keep");
  ::setenv("TMPDIR", tmp.c_str(), 1);
  provider_options o;
  o.backend = broken_adapter("crash");
  o.keep_temp = true;
  auto prov = make_attention_provider(o);
  try {
    (void)probes::run_attention_point(*prov, small_case(), all_rows());
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("files kept in " + tmp), std::string::npos) << e.what();
  }
  ASSERT_EQ(testing::count_entries(tmp), 1u);
  const auto dir = std::filesystem::directory_iterator(tmp)->path();
  for (const char* f : {"case.json", "q.npy", "k.npy", "v.npy", "exec.log"})
    EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  ::unsetenv("TMPDIR");
  std::filesystem::remove_all(tmp);
}

TEST(ExecProvider, CommandThatCannotStart) {
  provider_options o;
  o.backend = "exec:/nonexistent/numprobe-adapter {in}";
  auto prov = make_attention_provider(o);
  try {
    (void)probes::run_attention_point(*prov, small_case(), all_rows());
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend);
    EXPECT_NE(std::string(e.what()).find("could not be started"), std::string::npos) << e.what();
  }
}

TEST(ExecProvider, CommandLineIsSplitWithoutAShell) {
  const auto w = exec::split_command(R"(python3 'a b.py' "c \"d\"" e\ f {in};rm)", "--backend");
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[1], "a b.py");
  EXPECT_EQ(w[2], "c \"d\"");
  EXPECT_EQ(w[3], "e f");
  EXPECT_EQ(w[4], "{in};rm");  // no shell: ';' is an ordinary character
  const auto s = exec::substitute(w, "/I", "/O", "/I/case.json");
  EXPECT_EQ(s[4], "/I;rm");
  EXPECT_THROW((void)exec::split_command("python3 'open", "--backend"), error);
  provider_options o;
  o.backend = "exec:";
  EXPECT_THROW((void)make_attention_provider(o), error);
}

// ---------------------------------------------------------------------------- worker mode

TEST(ExecWorker, OneProcessServesTheWholeSweep) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const std::string tmp = testing::fresh_dir("worker");
  const std::string log = tmp + "/starts.log";
  ::setenv("NUMPROBE_TEST_START_LOG", log.c_str(), 1);
  provider_options o;
  o.backend = worker_backend();
  auto prov = make_attention_provider(o);
  probes::drift_options d;
  d.base = small_case();
  d.seq_lo = 60;
  d.seq_hi = 140;
  d.points = "60,63,64,65,100,140";
  d.probe.sampling.max_rows = 16;
  const auto r = probes::run_drift(*prov, d);
  EXPECT_TRUE(r.point_errors.empty());
  ASSERT_EQ(r.points.size(), 6u);
  for (const auto& p : r.points) EXPECT_LE(p.kernel.rel_rms, std::ldexp(1.0, -24)) << p.case_id;
  EXPECT_EQ(prov->metadata()["worker_starts"], 1);
  prov.reset();  // QUIT
  std::ifstream in(log);
  int starts = 0;
  for (std::string line; std::getline(in, line);) starts += line.rfind("start", 0) == 0;
  EXPECT_EQ(starts, 1);
  ::unsetenv("NUMPROBE_TEST_START_LOG");
  std::filesystem::remove_all(tmp);
}

TEST(ExecWorker, ErrAnswerFailsOnePointAndTheWorkerStaysUp) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  ::setenv("NUMPROBE_TEST_FAIL_SEQ", "65", 1);
  ::setenv("NUMPROBE_TEST_FAIL_MODE", "raise", 1);
  provider_options o;
  o.backend = worker_backend();
  auto prov = make_attention_provider(o);
  probes::drift_options d;
  d.base = small_case();
  d.seq_lo = 64;
  d.seq_hi = 66;
  d.points = "64,65,66";
  d.probe.sampling.max_rows = 16;
  const auto r = probes::run_drift(*prov, d);
  ASSERT_EQ(r.point_errors.size(), 1u);
  EXPECT_NE(r.point_errors[0].message.find("ERR ValueError: refusing seq 65 on purpose"),
            std::string::npos) << r.point_errors[0].message;
  EXPECT_EQ(r.points.size(), 2u);
  EXPECT_EQ(prov->metadata()["worker_starts"], 1);
  ::unsetenv("NUMPROBE_TEST_FAIL_SEQ");
  ::unsetenv("NUMPROBE_TEST_FAIL_MODE");
}

TEST(ExecWorker, DeadWorkerFailsOnePointAndIsRestarted) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  ::setenv("NUMPROBE_TEST_FAIL_SEQ", "65", 1);
  ::setenv("NUMPROBE_TEST_FAIL_MODE", "exit", 1);
  provider_options o;
  o.backend = worker_backend();
  auto prov = make_attention_provider(o);
  probes::drift_options d;
  d.base = small_case();
  d.seq_lo = 64;
  d.seq_hi = 66;
  d.points = "64,65,66";
  d.probe.sampling.max_rows = 16;
  const auto r = probes::run_drift(*prov, d);
  ASSERT_EQ(r.point_errors.size(), 1u);
  EXPECT_NE(r.point_errors[0].message.find("exited with status 5"), std::string::npos)
      << r.point_errors[0].message;
  EXPECT_EQ(r.points.size(), 2u);
  EXPECT_EQ(prov->metadata()["worker_starts"], 2);
  ::unsetenv("NUMPROBE_TEST_FAIL_SEQ");
  ::unsetenv("NUMPROBE_TEST_FAIL_MODE");
}

TEST(ExecWorker, SilentWorkerTimesOut) {
  provider_options o;
  o.backend = "exec-worker:sleep 30";  // never says READY
  o.exec_timeout_s = 0.5;
  auto prov = make_attention_provider(o);
  try {
    (void)probes::run_attention_point(*prov, small_case(), all_rows());
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend);
    EXPECT_NE(std::string(e.what()).find("gave no READY within 0.5 s"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace numprobe
