// `--backend plugin:lib.so`: the example plugin passes, a wrong-ABI build is refused, missing
// symbols and unsupported cases are errors naming the plugin and the function.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <map>
#include <regex>

#include "numprobe/base/error.hpp"
#include "probes/point/attention_probe.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

// plugin:PATH runs the plugin in a numprobe worker process (plugin_worker.hpp); this test
// program is not numprobe, so it names the binary (ctest sets it too).
const bool k_worker_set = [] {
  ::setenv("NUMPROBE_PLUGIN_WORKER", (std::string(NUMPROBE_BINARY_DIR) + "/numprobe").c_str(), 0);
  return true;
}();

provider_options plugin(const std::string& path) {
  provider_options o;
  o.backend = "plugin:" + path;
  return o;
}

attention_case plugin_case() {
  attention_case c;
  c.batch = 2;
  c.queries = 40;
  c.seq = 150;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.dtype = formats::format_id::m_bf16;
  c.mask = mask_kind::m_causal;
  return c;
}

std::string backend_error(const provider_options& o, const attention_case* c = nullptr) {
  try {
    auto prov = make_attention_provider(o);
    if (c) {
      probes::attention_probe_options po;
      (void)probes::run_attention_point(*prov, *c, po);
    }
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(PluginProvider, ExamplePluginPasses) {
  auto prov = make_attention_provider(plugin(NUMPROBE_EXAMPLE_PLUGIN));
  EXPECT_NE(prov->name().find("naive-fp32"), std::string::npos) << prov->name();
  EXPECT_EQ(prov->metadata()["abi_version"], 1);
  for (mask_kind m : {mask_kind::m_none, mask_kind::m_causal, mask_kind::m_window}) {
    attention_case c = plugin_case();
    c.mask = m;
    if (m == mask_kind::m_window) c.window = 33;
    probes::attention_probe_options po;
    po.sampling.max_rows = 0;
    const auto p = probes::run_attention_point(*prov, c, po);
    EXPECT_EQ(p.kernel.nan_count, 0);
    // Basis: float32 dot products and sums over at most n = S + D = 214 terms have relative
    // error below gamma_n = n u / (1 - n u) with u = 2^-24 (Higham, recursive summation);
    // exp/log/divide add a few ulps. The RMS over a row stays below that worst case.
    const double u = std::ldexp(1.0, -24);
    const double n = static_cast<double>(c.seq + c.head_dim);
    EXPECT_LE(p.kernel.rel_rms, n * u / (1 - n * u)) << p.case_id;
    EXPECT_LE(p.kernel.lse_max_abs, n * u * 8) << p.case_id;  // |lse| < 8 here; same basis
    EXPECT_LT(p.ratio_to_naive, 0.1) << "fp32 kernel vs a bf16 naive baseline";
  }
}

TEST(PluginProvider, WrongAbiBuildIsRefused) {
  const auto what = backend_error(plugin(NUMPROBE_WRONG_ABI_PLUGIN));
  EXPECT_NE(what.find(NUMPROBE_WRONG_ABI_PLUGIN), std::string::npos) << what;
  EXPECT_NE(what.find("numprobe_kernel_abi_version"), std::string::npos) << what;
  EXPECT_NE(what.find("ABI version 999"), std::string::npos) << what;
}

TEST(PluginProvider, MissingSymbolNamesTheFunction) {
  // libm loads fine but exports none of the ABI.
  const auto what = backend_error(plugin("libm.so.6"));
  EXPECT_NE(what.find("plugin libm.so.6: numprobe_kernel_abi_version"), std::string::npos) << what;
  EXPECT_NE(what.find("does not export"), std::string::npos) << what;
}

TEST(PluginProvider, UnloadableFileIsAnError) {
  const auto what = backend_error(plugin("/nonexistent/libkernel.so"));
  EXPECT_NE(what.find("plugin /nonexistent/libkernel.so: cannot load"), std::string::npos) << what;
}

TEST(PluginProvider, UnsupportedCaseNamesTheFunction) {
  attention_case c = plugin_case();
  c.dtype = formats::format_id::m_f64;  // the example takes float32 buffers only
  auto what = backend_error(plugin(NUMPROBE_EXAMPLE_PLUGIN), &c);
  EXPECT_NE(what.find("numprobe_attention_forward: unsupported: inputs in f64"), std::string::npos)
      << what;
  c = plugin_case();
  c.mask = mask_kind::m_ranges;
  c.batch = 1;
  for (std::int64_t t = 0; t < c.t(); ++t) c.ranges.push_back({0, t + 1});
  what = backend_error(plugin(NUMPROBE_EXAMPLE_PLUGIN), &c);
  EXPECT_NE(what.find("unsupported: mask ranges"), std::string::npos) << what;
}


// ---------------------------------------------------------------- split-KV decode (issue 8)

provider_options plugin_decode(const std::string& path, std::map<std::string, std::string> knobs) {
  provider_options o = plugin(path);
  o.knobs = std::move(knobs);
  o.knobs["decode"] = "";
  return o;
}

attention_case decode_case(std::int64_t s, std::int64_t t, mask_kind m) {
  attention_case c;
  c.batch = 2;
  c.queries = t;
  c.seq = s;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.dtype = formats::format_id::m_bf16;
  c.mask = m;
  c.seed = 71;
  return c;
}

std::string input_error(const provider_options& o, const attention_case* c = nullptr) {
  try {
    auto prov = make_attention_provider(o);
    if (c) {
      probes::attention_probe_options po;
      (void)probes::run_attention_point(*prov, *c, po);
    }
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(PluginProvider, ExamplePluginDecodeMatchesReference) {
  // Lengths crossing the split boundaries (chunk = ceil(S / splits)), T = 1..8 new queries,
  // splits > S (empty splits), and the causal mask (per-query key counts S - T + t + 1).
  struct point {
    std::int64_t s, t, splits;
  };
  const point points[] = {{1, 1, 4},   {3, 2, 4},    {8, 1, 4},     {9, 8, 4},  {127, 5, 4},
                          {128, 1, 4}, {129, 8, 4},  {1000, 3, 7},  {5, 1, 16}, {5, 4, 16},
                          {6, 8, 64},  {300, 8, 1},  {2049, 8, 32}};
  for (const point& pt : points)
    for (mask_kind m : {mask_kind::m_none, mask_kind::m_causal}) {
      auto prov = make_attention_provider(
          plugin_decode(NUMPROBE_EXAMPLE_PLUGIN, {{"splits", std::to_string(pt.splits)}}));
      EXPECT_EQ(prov->metadata()["decode"]["splits"], pt.splits);
      const attention_case c = decode_case(pt.s, pt.t, m);
      probes::attention_probe_options po;
      po.sampling.max_rows = 0;
      const auto p = probes::run_attention_point(*prov, c, po);
      EXPECT_EQ(p.kernel.nan_count, 0) << p.case_id;  // outputs are poisoned with NaN before the call
      // Basis: each split is a float32 dot product (D terms), a float32 sum over at most
      // chunk <= S keys and a float32 P.V sum (at most S terms); the merge adds at most `splits`
      // float32 terms. Relative error below gamma_n = n u / (1 - n u), n = S + D + splits,
      // u = 2^-24 (Higham, recursive summation); exp/log/divide add a few ulps. The RMS over a
      // row stays below that worst case.
      const double u = std::ldexp(1.0, -24);
      const double n = static_cast<double>(c.seq + c.head_dim + pt.splits);
      EXPECT_LE(p.kernel.rel_rms, n * u / (1 - n * u)) << p.case_id << " splits " << pt.splits;
      EXPECT_LE(p.kernel.lse_max_abs, n * u * 16) << p.case_id;  // |lse| < 16 here; same basis
      if (c.seq == 1)  // one key: O is that key's V row exactly (weight exp(0) / 1 = 1)
        EXPECT_EQ(p.kernel.rel_rms, 0.0) << p.case_id;
      else
        EXPECT_LT(p.ratio_to_naive, 0.1) << p.case_id << ": fp32 decode vs a bf16 naive baseline";
    }
}

TEST(PluginProvider, ExamplePluginDecodeSplitsChangeTheRoundingOnly) {
  // Decode with 1 split and with 13 splits computes the same attention in a different order:
  // the outputs differ (the decode path runs, with the requested splits) by at most rounding.
  const attention_case c = decode_case(1000, 4, mask_kind::m_causal);
  const attention_inputs in(c, false);
  const std::vector<std::int64_t> rows = {0, 3, 5, 7};
  auto one = make_attention_provider(plugin_decode(NUMPROBE_EXAMPLE_PLUGIN, {{"splits", "1"}}));
  auto many = make_attention_provider(plugin_decode(NUMPROBE_EXAMPLE_PLUGIN, {{"splits", "13"}}));
  const attention_output a = one->run(in, rows), b = many->run(in, rows);
  ASSERT_EQ(a.o.size(), b.o.size());
  double max_diff = 0, max_abs = 0;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.o.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a.o[i]) && std::isfinite(b.o[i])) << i;
    max_diff = std::max(max_diff, std::fabs(a.o[i] - b.o[i]));
    max_abs = std::max(max_abs, std::fabs(a.o[i]));
    differing += a.o[i] != b.o[i] ? 1 : 0;
  }
  EXPECT_GT(differing, 0u) << "13 splits gave the bits of 1 split: --splits did not reach the plugin";
  // Basis: both are within gamma_n (n = S + D + 13, u = 2^-24) of the exact value, relative to
  // the row's magnitude (|O| <= max |V|), so they differ by at most twice that.
  const double u = std::ldexp(1.0, -24), n = 1000 + 64 + 13;
  EXPECT_LE(max_diff, 2 * n * u / (1 - n * u) * max_abs);
}

TEST(PluginProvider, DecodeWithoutPluginDecodeIsRefused) {
  const auto what = input_error(plugin_decode(NUMPROBE_FORWARD_ONLY_PLUGIN, {{"splits", "4"}}));
  EXPECT_NE(what.find(std::string("plugin ") + NUMPROBE_FORWARD_ONLY_PLUGIN + ": numprobe_attention_decode"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("NUMPROBE_OP_DECODE"), std::string::npos) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
}

TEST(PluginProvider, DecodeKnobsTheAbiCannotExpressAreRefused) {
  for (const char* knob : {"page-size", "kv-format", "kv-scale", "p-format", "p-prescale",
                           "acc-promote", "split-size"}) {
    const auto what = input_error(plugin_decode(NUMPROBE_EXAMPLE_PLUGIN, {{knob, "16"}}));
    EXPECT_EQ(what.rfind(std::string("--") + knob, 0), 0u) << knob << ": " << what;
  }
  // --splits without --decode, and a bad split count.
  provider_options o = plugin(NUMPROBE_EXAMPLE_PLUGIN);
  o.knobs["splits"] = "4";
  EXPECT_EQ(input_error(o).rfind("--splits", 0), 0u);
  EXPECT_EQ(input_error(plugin_decode(NUMPROBE_EXAMPLE_PLUGIN, {{"splits", "0"}})).rfind("--splits", 0), 0u);
  EXPECT_EQ(input_error(plugin_decode(NUMPROBE_EXAMPLE_PLUGIN, {{"splits", "x"}})).rfind("--splits", 0), 0u);
  // A sliding window has no field in numprobe_decode_params.
  attention_case c = decode_case(100, 2, mask_kind::m_window);
  c.window = 10;
  const auto what = input_error(plugin_decode(NUMPROBE_EXAMPLE_PLUGIN, {}), &c);
  EXPECT_EQ(what.rfind("--mask", 0), 0u) << what;
  EXPECT_NE(what.find("numprobe_attention_decode"), std::string::npos) << what;
}

}  // namespace
}  // namespace numprobe
