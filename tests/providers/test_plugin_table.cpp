// A kernel library linked into numprobe, given as its numprobe_kernel_table (the form the
// built-in GPU kernels register through, src/kernels/gpu/builtin_kernel_table.hpp): loaded
// without dlopen, with the checks of a loaded plugin (version, required entries, advertised
// entries), and called through the same plugin::library::invoke.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/kernel_abi.h"
#include "src/providers/plugin_buffers.hpp"
#include "src/providers/plugin_library.hpp"

namespace numprobe {
namespace {

std::uint32_t g_version = NUMPROBE_KERNEL_ABI_VERSION;
std::uint32_t g_features = 0;
int g_variant_calls = 0;

std::uint32_t version() { return g_version; }
int caps(numprobe_capabilities* c) {
  c->abi_version = NUMPROBE_KERNEL_ABI_VERSION;
  c->name = "table-test";
  c->description = "o = 2 q (host f32)";
  c->ops = NUMPROBE_OP_ATTENTION_FORWARD;
  c->features = g_features;
  c->input_dtypes = c->output_dtypes = 1u << NUMPROBE_DTYPE_F32;
  c->masks = 1u << NUMPROBE_MASK_NONE;
  c->memory = NUMPROBE_MEMORY_HOST;
  return NUMPROBE_STATUS_OK;
}
int forward(const numprobe_attention_params* p) {
  const auto n = p->q.shape[0] * p->q.shape[1] * p->q.shape[2];
  for (std::int64_t i = 0; i < n; ++i)
    static_cast<float*>(p->o.data)[i] = 2.f * static_cast<const float*>(p->q.data)[i];
  return NUMPROBE_STATUS_OK;
}
int forward_variant(const numprobe_attention_params*, const numprobe_kernel_variant*) {
  ++g_variant_calls;
  return NUMPROBE_STATUS_OK;
}

numprobe_kernel_table good_table() {
  numprobe_kernel_table t{};
  t.struct_size = sizeof(t);
  t.abi_version = &version;
  t.capabilities = &caps;
  t.attention_forward = &forward;
  return t;
}

std::string refusal(const numprobe_kernel_table& t) {
  try {
    plugin::library lib(t, "table-under-test", 0);
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend) << e.what();
    return e.what();
  }
  return "";
}

class plugin_table : public ::testing::Test {
 protected:
  void SetUp() override {
    g_version = NUMPROBE_KERNEL_ABI_VERSION;
    g_features = 0;
    g_variant_calls = 0;
  }
};

TEST_F(plugin_table, loads_and_calls_like_a_plugin) {
  const numprobe_kernel_table t = good_table();
  plugin::library lib(t, "table-under-test", 0);
  EXPECT_EQ(lib.caps().name, "table-test");
  EXPECT_EQ(lib.forward_variant(), nullptr);  // not advertised
  float q[4] = {1, 2, 3, 4}, o[4] = {0, 0, 0, 0};
  plugin::call c;
  c.forward.struct_size = sizeof(c.forward);
  c.forward.q = plugin::dense(q, NUMPROBE_DTYPE_F32, {1, 1, 4});
  c.forward.o = plugin::dense(o, NUMPROBE_DTYPE_F32, {1, 1, 4});
  c.forward.memory = NUMPROBE_MEMORY_HOST;
  c.regions = {{q, sizeof(q), false}, {o, sizeof(o), true}};
  const plugin::call_result r = lib.invoke(c);
  EXPECT_EQ(r.status, NUMPROBE_STATUS_OK);
  EXPECT_EQ(o[3], 8.f);
}

TEST_F(plugin_table, refuses_what_a_loaded_plugin_would_be_refused_for) {
  g_version = NUMPROBE_KERNEL_ABI_VERSION + 1;
  std::string e = refusal(good_table());
  EXPECT_NE(e.find("plugin table-under-test: numprobe_kernel_abi_version"), std::string::npos) << e;
  g_version = NUMPROBE_KERNEL_ABI_VERSION;

  numprobe_kernel_table t = good_table();
  t.attention_forward = nullptr;
  e = refusal(t);
  EXPECT_NE(e.find("numprobe_attention_forward: the plugin does not export this required function"),
            std::string::npos)
      << e;

  t = good_table();
  t.struct_size = sizeof(t) - 1;
  EXPECT_NE(refusal(t).find("smaller than"), std::string::npos);

  // An advertised entry must be there.
  g_features = NUMPROBE_FEATURE_VARIANTS;
  EXPECT_NE(refusal(good_table()).find("numprobe_attention_forward_variant"), std::string::npos);
}

TEST_F(plugin_table, variant_entry_when_advertised) {
  g_features = NUMPROBE_FEATURE_VARIANTS;
  numprobe_kernel_table t = good_table();
  t.forward_variant = &forward_variant;
  plugin::library lib(t, "table-under-test", 0);
  ASSERT_NE(lib.forward_variant(), nullptr);
  numprobe_kernel_variant v{};
  v.struct_size = sizeof(v);
  EXPECT_EQ(lib.forward_variant()(nullptr, &v), NUMPROBE_STATUS_OK);
  EXPECT_EQ(g_variant_calls, 1);
}

}  // namespace
}  // namespace numprobe
