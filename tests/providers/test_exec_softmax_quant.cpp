// `softmax --backend exec:CMD` and `quant --backend exec:CMD` (issue 8): the NumPy adapters in
// examples/exec pass, and deliberately broken adapters give a one-line backend error (exit 3)
// naming the case and the file, with their temporary directories removed (or kept with keep).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "byok_test_support.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/formats/scheme.hpp"
#include "numprobe/formats/conventions.hpp"
#include "probes/quant/quant_probe.hpp"
#include "probes/softmax/softmax_probe.hpp"

namespace numprobe {
namespace {

using testing::count_entries;
using testing::fresh_dir;
using testing::have_numpy;
using testing::python;
using testing::source_path;

bool have_ml_dtypes() {
  static const bool ok = [] {
    if (!have_numpy()) return false;
    const std::string cmd = "'" + python() + "' -c 'import ml_dtypes' >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }();
  return ok;
}

std::string script(const std::string& rel, const std::string& args) {
  return "exec:'" + python() + "' '" + source_path(rel) + "' " + args;
}

// Each test gets its own TMPDIR, so "the temporary directories are gone" is checkable.
struct temp_scope {
  std::string dir, old;
  explicit temp_scope(const std::string& name) : dir(fresh_dir(name)) {
    if (const char* t = std::getenv("TMPDIR")) old = t;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~temp_scope() {
    if (old.empty()) ::unsetenv("TMPDIR");
    else ::setenv("TMPDIR", old.c_str(), 1);
    std::filesystem::remove_all(dir);
  }
};

// ------------------------------------------------------------------------------ softmax

softmax_case small_softmax(softmax_mask mask = softmax_mask::m_none) {
  softmax_case c;
  c.vocab = 1000 + 25;
  c.rows = 3;
  c.dtype = formats::format_id::m_bf16;
  c.mask = mask;
  return c;
}

probes::softmax_point run_softmax_exec(const std::string& backend, const softmax_case& c,
                                       double timeout = 60.0, bool keep = false) {
  softmax_provider_options ko;
  ko.backend = backend;
  ko.exec_timeout_s = timeout;
  ko.keep_temp = keep;
  auto k = make_softmax_provider(ko);
  probes::softmax_probe_options po;
  po.end_to_end = false;
  return probes::run_softmax_point(*k, c, po);
}

TEST(exec_softmax, numpy_adapter_matches_the_reference) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  temp_scope tmp("softmax_ok");
  struct variant {
    softmax_case c;
  };
  std::vector<softmax_case> cases;
  cases.push_back(small_softmax());
  cases.push_back(small_softmax(softmax_mask::m_padding));
  cases.push_back(small_softmax(softmax_mask::m_banned));
  auto capped = small_softmax(softmax_mask::m_padding);
  capped.softcap = 30.0;
  capped.temperature = 0.7;
  cases.push_back(capped);
  for (const auto& c : cases) {
    const auto p = run_softmax_exec(script("examples/exec/numpy_softmax.py", "{in}"), c);
    EXPECT_EQ(p.kernel.nan_count, 0) << c.id();
    EXPECT_EQ(p.kernel.inf_count, 0) << c.id();
    // Basis: p is float64 rounded once to float32 (relative error <= 2^-24 per element); the
    // reference's own error is <= 1e-12 relative.
    EXPECT_LE(p.kernel.p_rel_rms, 0x1p-24 + 1e-12) << c.id();
    EXPECT_GT(p.kernel.p_rel_rms, 0.0) << "float32 output cannot be exact everywhere";
    // logp and LSE in float64: a few ulp of |z| <= ~10, far below 1e-12.
    EXPECT_LE(p.kernel.logp_max_abs, 1e-12) << c.id();
    EXPECT_LE(p.kernel.lse_max_abs, 1e-12) << c.id();
    EXPECT_EQ(p.kernel.top1, 1.0) << c.id();
  }
  EXPECT_EQ(count_entries(tmp.dir), 0u) << "case directories are removed";
}

// Worker mode: one Python process for every case of a sweep (worker_starts 1), with the same
// outputs as the one-shot form of the same adapter (the same code computes them), and the
// adapter's arguments passed through (--probs-only: the LSE is derived, so it differs).
TEST(exec_softmax, worker_serves_every_case_with_one_process) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  temp_scope tmp("softmax_worker");
  const std::string worker = "exec-worker:'" + python() + "' '" + source_path("examples/exec/worker.py") + "' ";
  softmax_provider_options ko;
  ko.backend = worker + "numpy_softmax";
  auto k = make_softmax_provider(ko);
  EXPECT_EQ(k->name().rfind("exec-worker[", 0), 0u) << k->name();
  probes::softmax_probe_options po;
  po.end_to_end = false;
  std::vector<softmax_case> cases = {small_softmax(), small_softmax(softmax_mask::m_padding),
                                     small_softmax(softmax_mask::m_all)};
  cases[1].vocab = 4097;
  for (const auto& c : cases) {
    const auto w = probes::run_softmax_point(*k, c, po);
    const auto once = run_softmax_exec(script("examples/exec/numpy_softmax.py", "{in}"), c);
    EXPECT_EQ(w.kernel.nan_count, 0) << c.id();
    EXPECT_EQ(w.kernel.p_rel_rms, once.kernel.p_rel_rms) << c.id();
    EXPECT_EQ(w.kernel.lse_max_abs, once.kernel.lse_max_abs) << c.id();
    EXPECT_EQ(w.kernel.logp_max_abs, once.kernel.logp_max_abs) << c.id();
  }
  EXPECT_EQ(k->metadata().at("worker_starts"), 1) << k->metadata().dump();
  ko.backend = worker + "numpy_softmax --probs-only";
  auto kp = make_softmax_provider(ko);
  const auto probs = probes::run_softmax_point(*kp, small_softmax(softmax_mask::m_padding), po);
  EXPECT_GT(probs.kernel.lse_max_abs, 0.0) << "LSE derived from float32 p";
  EXPECT_LE(probs.kernel.lse_max_abs, 0x1p-24 * 1.01);
  // An adapter without main() for softmax: the case fails (exit 3), the worker stays up.
  ko.backend = worker + "'" + source_path("tests/providers/adapters/attention_only_adapter.py") + "'";
  auto bad = make_softmax_provider(ko);
  try {
    (void)probes::run_softmax_point(*bad, small_softmax(), po);
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend);
    EXPECT_NE(std::string(e.what()).find("no main(argv) for op softmax"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
  k.reset();
  kp.reset();
  bad.reset();
  EXPECT_EQ(count_entries(tmp.dir), 0u) << "case and session directories are removed";
}

TEST(exec_softmax, fully_masked_rows_and_probabilities_only) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  temp_scope tmp("softmax_masked");
  // mask=all: LSE -inf, p = 0 everywhere: no NaN, no inf where the reference is finite.
  const auto all = run_softmax_exec(script("examples/exec/numpy_softmax.py", "{in}"),
                                    small_softmax(softmax_mask::m_all));
  EXPECT_EQ(all.kernel.nan_count, 0);
  EXPECT_EQ(all.kernel.inf_count, 0);
  // y.npy alone: log p = log(float32 p), LSE read off the output at the row max. Basis: one
  // float32 rounding of p, relative 2^-24, is an absolute 2^-24 in log p (log(1 + d) <= d),
  // and the derived LSE inherits it.
  const auto p = run_softmax_exec(script("examples/exec/numpy_softmax.py", "{in} --probs-only"),
                                  small_softmax(softmax_mask::m_padding));
  EXPECT_EQ(p.kernel.nan_count, 0);
  EXPECT_LE(p.kernel.p_rel_rms, 0x1p-24 + 1e-12);
  EXPECT_LE(p.kernel.logp_max_abs, 0x1p-24 * 1.01);
  EXPECT_LE(p.kernel.lse_max_abs, 0x1p-24 * 1.01);
  EXPECT_GT(p.kernel.lse_max_abs, 0.0);
}

// Issue 27 item 5: NaN in a candidate's output is the kernel's answer, a finding (the probe counts
// it; the command exits 1 with its report), not a protocol error.
TEST(exec_softmax, nan_in_the_output_is_counted_not_an_error) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  temp_scope tmp("softmax_nan");
  const auto p = run_softmax_exec(script("tests/providers/adapters/broken_softmax_adapter.py", "nan {in}"),
                                  small_softmax(), 2.0);
  EXPECT_EQ(p.kernel.nan_count, 1);
  EXPECT_TRUE(p.nonfinite());
  EXPECT_EQ(count_entries(tmp.dir), 0u);
}

TEST(exec_softmax, broken_adapters_give_one_line_backend_errors) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  temp_scope tmp("softmax_broken");
  const struct {
    const char* mode;
    const char* says;
  } cases[] = {{"crash", "exited with status 5"},       {"hang", "timed out"},
               {"wrong_shape", "shape [3, 1024]"},      {"wrong_dtype", "dtype i32"},
               {"garbage", "not a readable .npy"},      {"missing", "neither y.npy"}};
  for (const auto& bc : cases) {
    const std::string backend =
        script("tests/providers/adapters/broken_softmax_adapter.py", std::string(bc.mode) + " {in}");
    try {
      (void)run_softmax_exec(backend, small_softmax(), 2.0);
      ADD_FAILURE() << bc.mode << ": no error";
    } catch (const error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.code(), exit_code::m_backend) << bc.mode;
      EXPECT_NE(what.find(bc.says), std::string::npos) << bc.mode << ": " << what;
      EXPECT_NE(what.find("softmax(V=1025"), std::string::npos) << "names the case: " << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
    }
    EXPECT_EQ(count_entries(tmp.dir), 0u) << bc.mode << ": case directory removed";
  }
  // --keep keeps the directory and names it.
  try {
    (void)run_softmax_exec(script("tests/providers/adapters/broken_softmax_adapter.py", "wrong_shape {in}"),
                           small_softmax(), 10.0, true);
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("files kept in"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_entries(tmp.dir), 1u);
}

// -------------------------------------------------------------------------------- quant

probes::quant_probe_options quant_options(const std::string& scheme, const std::string& backend) {
  probes::quant_probe_options o;
  o.scheme_name = scheme;
  o.config = formats::find_scheme(scheme).defaults;
  o.rows = 130;  // ragged against 128-row blocks
  o.cols = 300;  // and 128-column blocks
  o.dist = probes::quant_dist::m_llm;
  o.backend = backend;
  o.exec_timeout_s = 30.0;
  return o;
}

TEST(exec_quant, numpy_fp8_adapter_is_bit_exact) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  temp_scope tmp("quant_ok");
  for (const char* scheme : {"fp8-tensor", "fp8-block128", "fp8-act1x128", "fp8-act1x128-ue8m0"}) {
    const auto r = probes::run_quant(
        quant_options(scheme, script("examples/exec/numpy_quant_fp8.py", "{in}")));
    ASSERT_FALSE(r.device_check.is_null()) << scheme;
    EXPECT_TRUE(r.device_check["exact"].get<bool>()) << scheme << ": " << r.device_check.dump();
    EXPECT_EQ(r.device_check["elements"].get<std::int64_t>(), 130 * 300);
    EXPECT_EQ(r.device_check["dequant"]["mismatches"].get<std::int64_t>(), 0) << scheme;
    for (const auto& b : r.breaches) ADD_FAILURE() << scheme << ": breach " << b.bound;
  }
  EXPECT_EQ(count_entries(tmp.dir), 0u);
}

// The conventions reach the command (case.json "conventions") and the reference is quantized
// under them: an independent NumPy NVFP4 quantizer that follows them is bit-exact under every
// preset, on random and tie-adversarial inputs; the same quantizer told to ignore them
// (`--definition`) fails under the presets whose rules differ from the definition (the control
// that the check sees conventions at all).
TEST(exec_quant, nvfp4_adapter_is_bit_exact_under_each_preset) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  temp_scope tmp("quant_nvfp4");
  for (const char* preset : {"ocp", "torchao", "trtllm", "compressed-tensors"}) {
    std::int64_t control = 0;
    bool definition = true;
    for (auto dist : {probes::quant_dist::m_llm, probes::quant_dist::m_ties}) {
      auto o = quant_options("nvfp4", script("examples/exec/numpy_quant_nvfp4.py", "{in}"));
      o.dist = dist;
      formats::apply_convention_preset(preset, o.config);
      const auto r = probes::run_quant(o);
      const std::string what = std::string(preset) + " " + std::string(name(dist));
      ASSERT_FALSE(r.device_check.is_null()) << what;
      EXPECT_TRUE(r.device_check["exact"].get<bool>()) << what << ": " << r.device_check.dump();
      definition = o.config.conv == formats::quant_conventions{};
      if (definition) continue;
      o.backend = script("examples/exec/numpy_quant_nvfp4.py", "{in} --definition");
      control += probes::run_quant(o).device_check["element_mismatches"].get<std::int64_t>();
    }
    // compressed-tensors differs from the definition only in fp32 scale arithmetic, which
    // changes an e4m3 scale only where the fp32 quotient rounds across an e4m3 midpoint: neither
    // input here has such a block, so only the presets with a reciprocal division are controls.
    if (!definition && std::string(preset) != "compressed-tensors") {
      EXPECT_GT(control, 0) << preset << ": the control";
    }
  }
  EXPECT_EQ(count_entries(tmp.dir), 0u);
}

TEST(exec_quant, a_wrong_code_is_a_listed_mismatch_not_an_error) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  temp_scope tmp("quant_flip");
  const auto r = probes::run_quant(quant_options(
      "fp8-act1x128", script("tests/providers/adapters/broken_quant_adapter.py", "flip {in}")));
  EXPECT_FALSE(r.device_check["exact"].get<bool>());
  EXPECT_EQ(r.device_check["element_mismatches"].get<std::int64_t>(), 1);
  ASSERT_EQ(r.device_check["mismatches"].size(), 1u);
  EXPECT_EQ(r.device_check["mismatches"][0]["index"].get<std::int64_t>(), 5);
  EXPECT_EQ(r.device_check["mismatches"][0]["device_code"].get<std::uint32_t>(),
            r.device_check["mismatches"][0]["reference_code"].get<std::uint32_t>() ^ 1u);
  ASSERT_EQ(r.breaches.size(), 1u);
}

TEST(exec_quant, a_nan_scale_is_a_finding_not_an_error) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  temp_scope tmp("quant_nan");
  auto o = quant_options("fp8-act1x128", script("tests/providers/adapters/broken_quant_adapter.py", "nan {in}"));
  o.exec_timeout_s = 10.0;
  const auto r = probes::run_quant(o);
  EXPECT_EQ(r.device_check["nonfinite"].get<std::int64_t>(), 1) << r.device_check.dump();
  EXPECT_EQ(r.device_check["scale_mismatches"].get<std::int64_t>(), 1) << r.device_check.dump();
  bool named = false;
  for (const auto& b : r.breaches) named |= b.bound.rfind("nonfinite", 0) == 0;
  EXPECT_TRUE(named);
  EXPECT_EQ(count_entries(tmp.dir), 0u);
}

TEST(exec_quant, broken_adapters_give_one_line_backend_errors) {
  if (!have_ml_dtypes()) GTEST_SKIP() << "python3 with numpy and ml_dtypes not available";
  temp_scope tmp("quant_broken");
  const struct {
    const char* mode;
    const char* says;
  } cases[] = {{"crash", "exited with status 9"},     {"hang", "timed out"},
               {"wrong_shape", "codes.npy: shape [130, 299]"},
               {"wrong_dtype", "codes.npy: dtype i32"},
               {"garbage", "not a readable .npy"},      {"missing", "the kernel wrote no scales.npy"}};
  for (const auto& bc : cases) {
    auto o = quant_options("fp8-act1x128", script("tests/providers/adapters/broken_quant_adapter.py",
                                                  std::string(bc.mode) + " {in}"));
    // Short only for the adapter that hangs: the others must reach their own error, and a
    // Python start with numpy on a loaded 2-core machine took over 2 s (CI, 2026-12-06).
    o.exec_timeout_s = std::string(bc.mode) == "hang" ? 2.0 : 60.0;
    try {
      (void)probes::run_quant(o);
      ADD_FAILURE() << bc.mode << ": no error";
    } catch (const error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.code(), exit_code::m_backend) << bc.mode;
      EXPECT_NE(what.find(bc.says), std::string::npos) << bc.mode << ": " << what;
      EXPECT_NE(what.find("quant fp8-act1x128 [130x300]"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
    }
    EXPECT_EQ(count_entries(tmp.dir), 0u) << bc.mode << ": case directory removed";
  }
}

}  // namespace
}  // namespace numprobe
