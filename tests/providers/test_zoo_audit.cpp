// `numprobe audit` and `numprobe bisect` on the kernel zoo (examples/exec/zoo, issue 14 items 1
// and 7, issue 27 item 5): kernels written apart from the emulator, with their own tiles, behind
// exec-worker. The audit must name each
// kernel's planted class -- the class its docstring plants, fixed before the audit ran -- and
// pass the healthy kernel. Other classes may not fail beside the planted one, except where a
// bug really belongs to two (none in this zoo).
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>

#include "byok_test_support.hpp"
#include "support/run_command.hpp"

namespace numprobe {
namespace {

struct zoo_kernel {
  std::string kernel;
  std::string klass;  // "" for the healthy kernel
};

void PrintTo(const zoo_kernel& k, std::ostream* os) { *os << k.kernel; }

bool have_ml_dtypes() {
  static const bool ok = [] {
    const std::string cmd = "'" + testing::python() + "' -c 'import numpy, ml_dtypes' >/dev/null 2>&1";
    return !testing::python().empty() && std::system(cmd.c_str()) == 0;
  }();
  return ok;
}

// The kernel behind the persistent exec-worker, quoted for the shell.
std::string zoo_backend(const std::string& kernel) {
  return "\"exec-worker:'" + testing::python() + "' '" + testing::source_path("examples/exec/worker.py") + "' '" +
         testing::source_path("examples/exec/zoo/" + kernel + ".py") + "'\"";
}

class ZooAudit : public ::testing::TestWithParam<zoo_kernel> {};

TEST_P(ZooAudit, NamesThePlantedClassAlone) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  ::setenv("OPENBLAS_NUM_THREADS", "1", 0);  // small per-tile matmuls: one BLAS thread each
  const auto& p = GetParam();
  const std::string backend = zoo_backend(p.kernel);
  // The budget case: D=64, Hq=8, Hkv=2 (--quick keeps the CI run short).
  const auto r = testing::run_numprobe("audit --quick --heads 8 --kv-heads 2 --head-dim 64 --json - --backend " + backend);
  ASSERT_EQ(r.exit_code, p.klass.empty() ? 0 : 1) << p.kernel << "\n" << r.out.substr(0, 3000) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 400);
  std::set<std::string> failing;
  for (const auto& c : j["classes"])
    if (c["verdict"] == "fail") failing.insert(c["name"].get<std::string>());
  const std::set<std::string> want = p.klass.empty() ? std::set<std::string>{} : std::set<std::string>{p.klass};
  EXPECT_EQ(failing, want) << p.kernel << "\n" << j["classes"].dump(1).substr(0, 4000);
  EXPECT_EQ(j["healthy"].get<bool>(), p.klass.empty());
  EXPECT_TRUE(j["errors"].empty()) << j["errors"].dump();
}

INSTANTIATE_TEST_SUITE_P(
    zoo, ZooAudit,
    ::testing::Values(zoo_kernel{"healthy", ""}, zoo_kernel{"no_empty_guard", "empty or masked split"},
                      zoo_kernel{"split_nan", "empty or masked split"}, zoo_kernel{"finite_sentinel", "finite sentinel"},
                      zoo_kernel{"skip_rescale", "rescale or merge frame"},
                      zoo_kernel{"rowsum_bf16", "low-precision accumulation"},
                      zoo_kernel{"index_wrap", "index or dispatch threshold"},
                      zoo_kernel{"mask_top_left", "mask geometry"}, zoo_kernel{"tail_tile", "paged or tail tile"},
                      zoo_kernel{"gqa_mod", "GQA mapping"}, zoo_kernel{"p_fp8", "fp8 scaling"},
                      zoo_kernel{"wave_width", "wavefront width"}),
    [](const auto& info) { return info.param.kernel; });

// `numprobe bisect` on the zoo (issue 27 item 5): the two kernels whose class bisect missed.
// wave_width fails from the shortest length (rows of more than 32 keys) and must get the audit's
// name, "wavefront width", not "rescale or merge frame" (its rescale-stress rows fail 10x over
// max-first, but so do flat rows, where the max never rises). rowsum_bf16 holds under the
// default N(0,1) causal case at every length (l rounded to bf16 once per 80-key tile stays
// within 2x of the naive baseline there) and fails only under near-uniform rows, which bisect
// must try before "no failure", then bisect that family's length and classify it. The healthy
// kernel stays "no failure", exit 0. The expected classes are the docstrings' planted ones.
struct zoo_bisect_case {
  std::string kernel;
  std::string flags;
  std::string klass;    // the classification bisect must give
  std::string exposed;  // the family under which alone the failure appears ("": the case itself)
  int exit_code;
};

void PrintTo(const zoo_bisect_case& k, std::ostream* os) { *os << k.kernel; }

class ZooBisect : public ::testing::TestWithParam<zoo_bisect_case> {};

TEST_P(ZooBisect, NamesThePlantedClass) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  ::setenv("OPENBLAS_NUM_THREADS", "1", 0);
  const auto& p = GetParam();
  const std::string backend = zoo_backend(p.kernel);
  const auto r = testing::run_numprobe("bisect --heads 2 --kv-heads 1 --head-dim 64 " + p.flags +
                                       " --json - --backend " + backend);
  ASSERT_EQ(r.exit_code, p.exit_code) << p.kernel << "\n" << r.out.substr(0, 3000) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 400);
  EXPECT_EQ(j["classification"], p.klass) << p.kernel << "\n" << j["classes"].dump(1).substr(0, 4000);
  ASSERT_TRUE(j.contains("exposed_by")) << r.out.substr(0, 400);
  if (p.exposed.empty()) {
    EXPECT_TRUE(j["exposed_by"].is_null()) << j["exposed_by"].dump();
  } else {
    ASSERT_TRUE(j["exposed_by"].is_object()) << j["exposed_by"].dump();
    EXPECT_EQ(j["exposed_by"]["family"], p.exposed);
  }
}

INSTANTIATE_TEST_SUITE_P(
    zoo, ZooBisect,
    // --tile gives the docstrings' tiles, so no tile is inferred (2-3 s a case instead of 5).
    ::testing::Values(zoo_bisect_case{"wave_width", "--seq 256 --tile 128x64", "wavefront width", "", 1},
                      zoo_bisect_case{"rowsum_bf16", "--seq 2048 --tile 128x80", "low-precision accumulation",
                                      "dist=diffuse, mask=none, T=256", 1},
                      zoo_bisect_case{"healthy", "--seq 256 --tile 112x80", "no failure", "", 0}),
    [](const auto& info) { return info.param.kernel; });

}  // namespace
}  // namespace numprobe
