// `--backend plugin:lib.so`: the example plugin passes, a wrong-ABI build is refused, missing
// symbols and unsupported cases are errors naming the plugin and the function.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "numprobe/core/error.hpp"
#include "probes/attention_probe.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

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
  EXPECT_NE(what.find("numprobe_attention_forward: does not support inputs in f64"), std::string::npos)
      << what;
  c = plugin_case();
  c.mask = mask_kind::m_ranges;
  c.batch = 1;
  for (std::int64_t t = 0; t < c.t(); ++t) c.ranges.push_back({0, t + 1});
  what = backend_error(plugin(NUMPROBE_EXAMPLE_PLUGIN), &c);
  EXPECT_NE(what.find("does not support mask ranges"), std::string::npos) << what;
}

}  // namespace
}  // namespace numprobe
