// `numprobe audit` on the kernel zoo (examples/exec/zoo, issue 14 items 1 and 7): kernels written
// apart from the emulator, with their own tiles, behind exec-worker. The audit must name each
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

class ZooAudit : public ::testing::TestWithParam<zoo_kernel> {};

TEST_P(ZooAudit, NamesThePlantedClassAlone) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  ::setenv("OPENBLAS_NUM_THREADS", "1", 0);  // small per-tile matmuls: one BLAS thread each
  const auto& p = GetParam();
  const std::string backend = "\"exec-worker:'" + testing::python() + "' '" +
                              testing::source_path("examples/exec/worker.py") + "' '" +
                              testing::source_path("examples/exec/zoo/" + p.kernel + ".py") + "'\"";
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

}  // namespace
}  // namespace numprobe
