// The kernel zoo (examples/exec/zoo, issue 14 item 7) through the real binary and the worker
// protocol: every buggy kernel fails (exit 1) under the input family of its bug class and
// passes (exit 0) under a plain case where its bug cannot show; the healthy kernel passes
// both. The expected exits are fixed by how each bug is planted, never read off numprobe.
//
// Bounds and their basis:
//   ratio_to_naive<=2  FlashAttention's acceptance test: within 2x of the same-precision
//                      naive baseline (the healthy kernel measures 0.4-0.9 on these cases);
//   rel_rms<=0.015625  shifted logits (finite sentinel): 2^-6 = 8 bf16 unit roundoffs. The
//                      naive baseline rounds scores of magnitude 2e4 to bf16 (ulp 128) and is
//                      itself ~0.8 off, so a ratio would hide a collapse to O = 0 (rel_rms 1);
//                      the healthy kernel measures 4.8e-3 there;
//   rel_rms<=0.0625    the fp8-P kernel: e4m3's unit roundoff 2^-4 (against a bf16 baseline
//                      any fp8 P is ~8x off by design).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "byok_test_support.hpp"
#include "support/run_command.hpp"

namespace numprobe {
namespace {

struct zoo_case {
  std::string name;    // the test's id
  std::string kernel;  // examples/exec/zoo/<kernel>.py
  std::string args;    // case flags and the bound
  int expected_exit;
};

// gtest prints a parameter into the discovered test's name: print the id, not raw bytes.
void PrintTo(const zoo_case& c, std::ostream* os) { *os << c.name; }

const std::string k_ratio = " --bound 'ratio_to_naive<=2'";
const std::string k_sentinel = " --bound 'rel_rms<=0.015625'";
const std::string k_fp8 = " --bound 'rel_rms<=0.0625'";

// Each bug's exposing case and its plain contrast (README.md in the zoo has the measured values).
struct exposure {
  std::string kernel;
  std::string exposed;
  std::string plain;
};

const std::vector<exposure>& exposures() {
  static const std::vector<exposure> e{
      // rows t < T - S see no key; a q tile straddling them meets exp(-inf - -inf)
      {"no_empty_guard", "--queries 300 --seq 200" + k_ratio, "--seq 200" + k_ratio},
      // 965 = 4 * 240 + 5: rows before position 960 see nothing of the last split
      {"split_nan", "--queries 8 --seq 965" + k_ratio, "--queries 8 --seq 960" + k_ratio},
      // logits at -2e4, below the -1e4 sentinel, against logits at -1e3
      {"finite_sentinel", "--dist shifted --shift -2e4 --queries 64 --seq 500" + k_sentinel,
       "--dist shifted --shift -1e3 --queries 64 --seq 500" + k_sentinel},
      // the max rises on every key tile, against a max set by the first key
      {"skip_rescale", "--dist rescale-stress --queries 64 --seq 2000" + k_ratio,
       "--dist max-first --queries 64 --seq 2000" + k_ratio},
      // near-uniform rows over 26 key tiles, against two key tiles
      {"rowsum_bf16", "--dist diffuse --mask none --queries 64 --seq 2048" + k_ratio,
       "--dist diffuse --mask none --queries 64 --seq 160" + k_ratio},
      // query positions past 2^15, against positions below it
      {"index_wrap", "--heads 2 --kv-heads 1 --queries 64 --seq 33000" + k_ratio,
       "--heads 2 --kv-heads 1 --queries 64 --seq 32000" + k_ratio},
      // T != S (the NUMERICS probe T=3, S=128), against T = S
      {"mask_top_left", "--queries 3 --seq 128" + k_ratio, "--seq 128" + k_ratio},
      // 1000 = 10 * 96 + 40, against 960 = 10 * 96
      {"tail_tile", "--mask none --queries 64 --seq 1000" + k_ratio,
       "--mask none --queries 64 --seq 960" + k_ratio},
      // group size 2 with 2 KV heads, against MHA
      {"gqa_mod", "--heads 4 --kv-heads 2 --seq 500" + k_ratio, "--heads 4 --kv-heads 4 --seq 500" + k_ratio},
      // diffuse rows with P ~ 1/4096 < 2^-10, against P ~ 1/32
      {"p_fp8", "--dist diffuse --mask none --queries 64 --seq 4096" + k_fp8,
       "--dist diffuse --mask none --seq 32" + k_fp8},
      // 64-key tiles with keys in lanes 32..63, against 32 keys
      {"wave_width", "--mask none --seq 200" + k_ratio, "--mask none --seq 32" + k_ratio},
  };
  return e;
}

std::vector<zoo_case> zoo_cases() {
  std::vector<zoo_case> out;
  for (const auto& e : exposures()) {
    out.push_back({e.kernel + "_exposed", e.kernel, e.exposed, 1});
    out.push_back({e.kernel + "_plain", e.kernel, e.plain, 0});
    out.push_back({"healthy_under_" + e.kernel, "healthy", e.exposed, 0});
  }
  // The healthy kernel on its own: f16, a window edge, T > S with GQA 8/2, batch 2 + softcap,
  // at lengths crossing its 112x80 tiles.
  out.push_back({"healthy_f16_window", "healthy", "--dtype f16 --mask window --window 81 --seq 333" + k_ratio, 0});
  out.push_back({"healthy_f16_t_gt_s_gqa", "healthy",
                 "--dtype f16 --heads 8 --kv-heads 2 --queries 241 --seq 161" + k_ratio, 0});
  out.push_back({"healthy_batch2_softcap", "healthy",
                 "--batch 2 --softcap 30 --queries 113 --seq 481" + k_ratio, 0});
  return out;
}

bool have_ml_dtypes() {
  static const bool ok = [] {
    const std::string cmd = "'" + testing::python() + "' -c 'import numpy, ml_dtypes' >/dev/null 2>&1";
    return !testing::python().empty() && std::system(cmd.c_str()) == 0;
  }();
  return ok;
}

class Zoo : public ::testing::TestWithParam<zoo_case> {};

TEST_P(Zoo, ExitCodeUnderItsCase) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  // Small per-tile matmuls: one BLAS thread each, so that concurrent tests do not oversubscribe
  // the cores (OpenBLAS threads slow down tenfold on a loaded 2-core machine).
  ::setenv("OPENBLAS_NUM_THREADS", "1", 0);
  const auto& p = GetParam();
  const std::string backend = "\"exec-worker:'" + testing::python() + "' '" +
                              testing::source_path("examples/exec/worker.py") + "' '" +
                              testing::source_path("examples/exec/zoo/" + p.kernel + ".py") + "'\"";
  std::string args = p.args;
  if (args.find("--heads") == std::string::npos) args += " --heads 4 --kv-heads 2";
  const auto r = testing::run_numprobe("attention --head-dim 64 --seed 7 " + args + " --backend " + backend);
  EXPECT_EQ(r.exit_code, p.expected_exit) << p.kernel << " " << args << "\n" << r.out << r.err;
  // Exit 1 must be a finding with its report, never a backend error without one.
  if (p.expected_exit == 1) {
    EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Zoo, ::testing::ValuesIn(zoo_cases()),
                         [](const ::testing::TestParamInfo<zoo_case>& i) { return i.param.name; });

TEST(ZooSupport, Float16RoundingMatchesNumpy) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  // The zoo's fast float16 rounding (bit arithmetic) against numpy's float16 cast.
  const std::string cmd = "'" + testing::python() + "' '" +
                          testing::source_path("examples/exec/zoo/tiled.py") + "' --self-test >/dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace numprobe
