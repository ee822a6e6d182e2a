// The decode-variant addition within ABI version 1 (numprobe_decode_variant,
// NUMPROBE_FEATURE_DECODE_VARIANTS, numprobe_kernel_table::decode_variant), checked without a
// device: the layout a plugin compiles against, and how plugin::library reads a table of either
// version-1 size (an entry past struct_size is never read).
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/kernel_abi.h"
#include "src/providers/plugin_library.hpp"

namespace numprobe::plugin_table_decode_test {
namespace {

// The layout is the ABI: a reordering or a changed type here breaks compiled plugins. Offsets
// on LP64 (the platforms numprobe builds for).
static_assert(sizeof(void*) == 8, "the offsets below are LP64's");
static_assert(offsetof(numprobe_decode_variant, struct_size) == 0);
static_assert(offsetof(numprobe_decode_variant, variant) == 4);
static_assert(offsetof(numprobe_decode_variant, queries) == 8);
static_assert(offsetof(numprobe_decode_variant, mask) == 16);
static_assert(offsetof(numprobe_decode_variant, kv_storage) == 20);
static_assert(offsetof(numprobe_decode_variant, window) == 24);
static_assert(offsetof(numprobe_decode_variant, split_size) == 32);
static_assert(offsetof(numprobe_decode_variant, k_scale) == 40);
static_assert(offsetof(numprobe_decode_variant, v_scale) == 40 + sizeof(numprobe_tensor));
static_assert(offsetof(numprobe_decode_variant, p_e4m3) == 40 + 2 * sizeof(numprobe_tensor));
static_assert(offsetof(numprobe_decode_variant, p_prescale) == 44 + 2 * sizeof(numprobe_tensor));
static_assert(offsetof(numprobe_decode_variant, acc_promote) == 48 + 2 * sizeof(numprobe_tensor));
static_assert(offsetof(numprobe_decode_variant, acc_mantissa) == 52 + 2 * sizeof(numprobe_tensor));
static_assert(offsetof(numprobe_decode_variant, split_lse) == 56 + 2 * sizeof(numprobe_tensor));
static_assert(offsetof(numprobe_decode_variant, workspace) == 56 + 3 * sizeof(numprobe_tensor));
static_assert(sizeof(numprobe_decode_variant) == 56 + 4 * sizeof(numprobe_tensor));
// The table: the first version-1 entries unchanged, decode_variant appended after them.
static_assert(offsetof(numprobe_kernel_table, forward_variant) == 56);
static_assert(offsetof(numprobe_kernel_table, decode_variant) == 64);
static_assert(sizeof(numprobe_kernel_table) == 72);
static_assert(plugin::k_kernel_table_v1_size == 64);
// Feature bits are distinct.
static_assert((NUMPROBE_FEATURE_DECODE_VARIANTS &
               (NUMPROBE_FEATURE_SOFTCAP | NUMPROBE_FEATURE_LSE | NUMPROBE_FEATURE_BATCH | NUMPROBE_FEATURE_VARIANTS)) == 0);

std::uint32_t g_features = 0;
int g_decode_variant_calls = 0;

std::uint32_t version() { return NUMPROBE_KERNEL_ABI_VERSION; }
int caps(numprobe_capabilities* c) {
  c->abi_version = NUMPROBE_KERNEL_ABI_VERSION;
  c->name = "decode-table-test";
  c->ops = NUMPROBE_OP_ATTENTION_FORWARD | NUMPROBE_OP_DECODE;
  c->features = g_features;
  c->input_dtypes = c->output_dtypes = 1u << NUMPROBE_DTYPE_F32;
  c->masks = 1u << NUMPROBE_MASK_NONE;
  c->memory = NUMPROBE_MEMORY_HOST;
  return NUMPROBE_STATUS_OK;
}
int forward(const numprobe_attention_params*) { return NUMPROBE_STATUS_OK; }
int decode(const numprobe_decode_params*) { return NUMPROBE_STATUS_OK; }
int decode_variant(const numprobe_decode_params*, const numprobe_decode_variant* v) {
  ++g_decode_variant_calls;
  return v && v->struct_size >= sizeof(numprobe_decode_variant) ? NUMPROBE_STATUS_OK : NUMPROBE_STATUS_INVALID;
}

numprobe_kernel_table table_with_decode_variant() {
  numprobe_kernel_table t{};
  t.struct_size = sizeof(t);
  t.abi_version = &version;
  t.capabilities = &caps;
  t.attention_forward = &forward;
  t.attention_decode = &decode;
  t.decode_variant = &decode_variant;
  return t;
}

std::string refusal(const numprobe_kernel_table& t) {
  try {
    plugin::library lib(t, "decode-table", 0);
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend) << e.what();
    return e.what();
  }
  return "";
}

class plugin_table_decode : public ::testing::Test {
 protected:
  void SetUp() override {
    g_features = NUMPROBE_FEATURE_DECODE_VARIANTS;
    g_decode_variant_calls = 0;
  }
};

TEST_F(plugin_table_decode, entry_loaded_when_advertised) {
  const numprobe_kernel_table t = table_with_decode_variant();
  plugin::library lib(t, "decode-table", 0);
  ASSERT_EQ(lib.decode_variant(), &decode_variant);
  numprobe_decode_params p{};
  p.struct_size = sizeof(p);
  numprobe_decode_variant v{};
  v.struct_size = sizeof(v);
  EXPECT_EQ(lib.decode_variant()(&p, &v), NUMPROBE_STATUS_OK);
  EXPECT_EQ(g_decode_variant_calls, 1);
}

TEST_F(plugin_table_decode, entry_not_taken_unless_advertised) {
  g_features = 0;
  plugin::library lib(table_with_decode_variant(), "decode-table", 0);
  EXPECT_EQ(lib.decode_variant(), nullptr);
}

// A table compiled before decode_variant was appended (struct_size = the first version-1 size)
// still loads; whatever lies past its struct_size is not read, even when the entry is advertised
// (then the entry is missing: a refusal naming it).
TEST_F(plugin_table_decode, table_before_the_addition_still_loads) {
  numprobe_kernel_table t = table_with_decode_variant();
  t.struct_size = static_cast<std::uint32_t>(plugin::k_kernel_table_v1_size);
  g_features = 0;
  {
    plugin::library lib(t, "decode-table", 0);
    EXPECT_EQ(lib.decode_variant(), nullptr);
  }
  g_features = NUMPROBE_FEATURE_DECODE_VARIANTS;
  const std::string e = refusal(t);
  EXPECT_NE(e.find("plugin decode-table: numprobe_attention_decode_variant: the plugin does not export"),
            std::string::npos)
      << e;
}

TEST_F(plugin_table_decode, sizes_no_version_one_table_has_are_refused) {
  numprobe_kernel_table t = table_with_decode_variant();
  for (const std::size_t size : {std::size_t{0}, plugin::k_kernel_table_v1_size - 1, plugin::k_kernel_table_v1_size + 4,
                                 sizeof(numprobe_kernel_table) - 1}) {
    t.struct_size = static_cast<std::uint32_t>(size);
    const std::string e = refusal(t);
    EXPECT_NE(e.find("smaller than"), std::string::npos) << size << ": " << e;
  }
  // A later numprobe's table, larger than ours: loads, its extra entries unread.
  t.struct_size = sizeof(numprobe_kernel_table) + 8;
  plugin::library lib(t, "decode-table", 0);
  EXPECT_EQ(lib.decode_variant(), &decode_variant);
}

TEST_F(plugin_table_decode, advertised_entry_must_be_there) {
  numprobe_kernel_table t = table_with_decode_variant();
  t.decode_variant = nullptr;
  EXPECT_NE(refusal(t).find("numprobe_attention_decode_variant"), std::string::npos);
}

TEST_F(plugin_table_decode, decode_variants_need_the_decode_op) {
  static std::uint32_t ops;
  ops = NUMPROBE_OP_ATTENTION_FORWARD;
  numprobe_kernel_table t = table_with_decode_variant();
  t.capabilities = [](numprobe_capabilities* c) {
    const int s = caps(c);
    c->ops = ops;
    return s;
  };
  EXPECT_NE(refusal(t).find("without NUMPROBE_OP_DECODE"), std::string::npos);
}

}  // namespace
}  // namespace numprobe::plugin_table_decode_test
