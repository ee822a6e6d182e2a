// Verdicts a CI can trust (issue 27): a kernel's declared refusals (exec exit 77, a worker's
// UNSUPPORTED, issue 27 item 3) are verdicts, not crashes; an audit class is `pass` only with a
// probe and its control measured; a kernel wrong everywhere fails (item 2). The kernels are
// small NumPy adapters written here, run through the exec backends.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "byok_test_support.hpp"
#include "numprobe/base/error.hpp"
#include "support/run_command.hpp"

namespace numprobe {
namespace {

using testing::fresh_dir;
using testing::have_numpy;
using testing::python;
using testing::run_numprobe;
using testing::source_path;

// A worker adapter in a fresh directory: `body` is compute()'s body, with the reference adapter
// (examples/exec/numpy_reference.py) as `ref` and numprobe_exec.Unsupported as `Unsupported`.
std::string adapter(const std::string& name, const std::string& body) {
  const std::string dir = fresh_dir("verdicts_" + name);
  const std::string path = dir + "/" + name + ".py";
  std::ofstream(path) << "import sys\n"
                      << "sys.path.insert(0, '" << source_path("examples/exec") << "')\n"
                      << "import numpy as np\nimport numpy_reference as ref\n"
                      << "from numprobe_exec import Unsupported\n"
                      << "def compute(case, q, k, v):\n"
                      << body << "\n";
  return path;
}

std::string worker(const std::string& adapter_path) {
  return "\"exec-worker:'" + python() + "' '" + source_path("examples/exec/worker.py") + "' '" + adapter_path + "'\"";
}

nlohmann::json parse(const testing::command_result& r) {
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out.substr(0, 400) << r.err;
  return j;
}

// `numprobe audit --quick` of a worker adapter: its exit code must be `want`; the JSON document.
nlohmann::json audit(const std::string& adapter_path, int want, std::string* text = nullptr) {
  ::setenv("OPENBLAS_NUM_THREADS", "1", 0);
  const auto r = run_numprobe("audit --quick --seq 1024 --heads 4 --kv-heads 2 --head-dim 32 --json - --backend " +
                              worker(adapter_path));
  EXPECT_EQ(r.exit_code, want) << r.out.substr(0, 3000) << r.err;
  if (text) *text = r.out;
  return parse(r);
}

TEST(Verdicts, OneShotExit77IsUnsupportedNotACrash) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const std::string backend = "\"exec:'" + python() + "' '" + source_path("examples/exec/zoo/causal_only.py") + "' {in}\"";
  // The refused case: exit 3 for a single attention, with the kernel's reason.
  auto r = run_numprobe("attention --seq 96 --heads 2 --kv-heads 1 --head-dim 16 --mask none --backend " + backend);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("unsupported: unsupported: mask=none (this kernel implements causal attention only)"),
            std::string::npos)
      << r.err;
  // A case it implements runs and passes.
  r = run_numprobe("attention --seq 96 --heads 2 --kv-heads 1 --head-dim 16 --mask causal --backend " + backend);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(Verdicts, DriftSkipsRefusedPointsAndCountsNoError) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  // Refuses lengths above 200: the points 256.. are listed, not errors; the rest are judged.
  const auto k = adapter("short_only",
                         "    if case['seq'] > 200: raise Unsupported('S > 200')\n"
                         "    return ref.compute(case, q, k, v)");
  auto r = run_numprobe("drift --seq 64..512 --points 64,128,256,512 --heads 2 --kv-heads 1 --head-dim 16 --json - "
                        "--backend " + worker(k));
  EXPECT_EQ(r.exit_code, 0) << r.out.substr(0, 2000) << r.err;
  const auto d = parse(r);
  EXPECT_EQ(d["unsupported_points"].size(), 2u) << d["unsupported_points"].dump();
  EXPECT_TRUE(d["point_errors"].empty()) << d["point_errors"].dump();
  EXPECT_EQ(d["unsupported_points"][0]["reason"], "S > 200");
  // Every point refused: nothing measured, which is no pass (exit 2, naming the reason).
  r = run_numprobe("drift --seq 256..512 --points 256,512 --heads 2 --kv-heads 1 --head-dim 16 --backend " + worker(k));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("every point of this sweep unsupported (S > 200)"), std::string::npos) << r.err;
}

TEST(Verdicts, RefusalReasonIsOnePrintableLine) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  // A kernel's reason is untrusted text: an escape sequence must reach neither the terminal nor
  // the JSON as a control character (it is written \x1b), and a newline forges no line. The
  // one-shot form (exit 77, the last output line is the reason) hands the text over as printed.
  const auto k = adapter("hostile_reason",
                         "    if case['seq'] > 200: raise Unsupported('S > 200: numprobe: all good\x1b[31m')\n"
                         "    return ref.compute(case, q, k, v)\n"
                         "if __name__ == '__main__':\n"
                         "    sys.path.insert(0, '" + source_path("examples/exec/zoo") + "')\n"
                         "    import tiled\n"
                         "    sys.exit(tiled.main(compute, sys.argv))");
  const std::string flags = "drift --seq 64..256 --points 64,128,256 --heads 2 --kv-heads 1 --head-dim 16 "
                            "--backend \"exec:'" + python() + "' '" + k + "' {in}\"";
  // One run: the JSON to a file, the terminal report on stdout.
  const std::string json_path = fresh_dir("verdicts_hostile_reason_json") + "/d.json";
  const auto r = run_numprobe(flags + " --json '" + json_path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out.substr(0, 2000) << r.err;
  EXPECT_EQ((r.out + r.err).find('\x1b'), std::string::npos) << r.out << r.err;
  const auto d = nlohmann::json::parse(std::ifstream(json_path), nullptr, false);
  ASSERT_FALSE(d.is_discarded());
  ASSERT_EQ(d["unsupported_points"].size(), 1u) << d["unsupported_points"].dump();
  const std::string reason = d["unsupported_points"][0]["reason"];
  EXPECT_EQ(reason.find('\x1b'), std::string::npos) << reason;
  EXPECT_NE(reason.find("S > 200"), std::string::npos) << reason;
}

TEST(Verdicts, UnsupportedCaseKeepsItsReasonOnOneLine) {
  const unsupported_case e("plugin:k", "S > 200\nnumprobe: all good\x1b[31m");
  EXPECT_EQ(e.reason(), "S > 200\\nnumprobe: all good\\x1b[31m");
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
}

TEST(Verdicts, AuditOfACausalOnlyKernelDeclaresWhatItLacks) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const auto d = audit(source_path("examples/exec/zoo/causal_only.py"), 0);
  EXPECT_TRUE(d["errors"].empty()) << d["errors"].dump();
  ASSERT_FALSE(d["unsupported"].empty());
  std::set<std::string> reasons;
  for (const auto& u : d["unsupported"]) reasons.insert(u["reason"].get<std::string>().substr(0, 11));
  EXPECT_TRUE(reasons.count("mask=window")) << d["unsupported"].dump(1);
  std::size_t judged = 0;
  for (const auto& c : d["classes"]) {
    const auto v = c["verdict"].get<std::string>();
    EXPECT_TRUE(v == "pass" || v == "not-applicable") << c.dump(1);
    judged += v == "pass";
  }
  EXPECT_GE(judged, 5u) << d["classes"].dump(1);  // causal rows still show most classes
  EXPECT_EQ(d["baseline"]["verdict"], "pass") << d["baseline"].dump(1);
}

TEST(Verdicts, AuditOfAKernelThatCrashesEverywhereHasNoPass) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const auto k = adapter("always_err", "    raise RuntimeError('boom')");
  const auto d = audit(k, 3);
  for (const auto& c : d["classes"]) {
    const auto v = c["verdict"].get<std::string>();
    EXPECT_NE(v, "pass") << c.dump(1);
    if (c["name"] != "sub-byte formats") {
      EXPECT_EQ(v, "inconclusive") << c.dump(1);
      EXPECT_NE(c["evidence"][0].get<std::string>().find("inconclusive"), std::string::npos) << c.dump(1);
    }
  }
  EXPECT_EQ(d["baseline"]["verdict"], "inconclusive");
  EXPECT_FALSE(d["healthy"].get<bool>());
}

TEST(Verdicts, AuditOfAKernelThatRefusesEverythingIsNoPass) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  const auto k = adapter("refuse_all", "    raise Unsupported('nothing implemented')");
  // Nothing judged: the flags ask only for cases the kernel lacks (exit 2), never a pass.
  const auto d = audit(k, 2);
  for (const auto& c : d["classes"]) EXPECT_EQ(c["verdict"], "not-applicable") << c.dump(1);
  EXPECT_TRUE(d["errors"].empty());
}

TEST(Verdicts, AuditOfAKernelWrongEverywhereFails) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  // O doubled: every length breaks ratio_to_naive <= 2, controls included.
  const auto k = adapter("twice_o", "    o, lse = ref.compute(case, q, k, v)\n    return 2 * o, lse");
  std::string text;
  const auto d = audit(k, 1, &text);
  EXPECT_EQ(d["baseline"]["verdict"], "fail") << d["baseline"].dump(1);
  EXPECT_TRUE(d["baseline"]["wrong_everywhere"].get<bool>()) << d["baseline"].dump(1);
  EXPECT_FALSE(d["healthy"].get<bool>());
  // The JSON names it too (the terminal text is for people; the document is what CI reads).
  EXPECT_NE(d["baseline"]["worst"]["case"].get<std::string>().find("attention("), std::string::npos) << text;
  // 2*O is off by rel_rms 1 where a bf16 kernel is off by ~2^-8: far above the bound of 2.
  EXPECT_GT(d["baseline"]["worst"]["value"].get<double>(), 2.0) << d["baseline"].dump(1);
}

}  // namespace
}  // namespace numprobe
