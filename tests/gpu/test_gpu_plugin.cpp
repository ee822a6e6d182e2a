// The built-in CUDA forward kernel through the plugin ABI: `--backend plugin:libnumprobe_cuda_plugin.so`
// (device-memory path of the plugin provider: numprobe's device buffers and stream).
//
// Expectations and their basis:
//  - Bit-identical to `--backend cuda` on the same case: the plugin launches the same compiled
//    kernel (dispatch_flash, same tile, same scale rounding) on the same bf16/f16 values, and the
//    kernel is deterministic (no atomics, fixed reduction order), so O and LSE must match exactly.
//  - Within the bound of the reference (gpu_test_support.hpp: relative RMS <= 2x the naive
//    same-precision baseline, LSE within 1e-3 + D 2^-24 |LSE|, masked rows exact).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "numprobe/base/error.hpp"
#include "tests/gpu/gpu_test_support.hpp"

#ifndef NUMPROBE_CUDA_PLUGIN_PATH
#error "NUMPROBE_CUDA_PLUGIN_PATH must name libnumprobe_cuda_plugin.so"
#endif

namespace numprobe::gpu::testing {
namespace {

std::unique_ptr<attention_provider> plugin() {
  provider_options o;
  o.backend = std::string("plugin:") + NUMPROBE_CUDA_PLUGIN_PATH;
  return make_attention_provider(o);
}

attention_case pcase(std::int64_t s, mask_kind m, formats::format_id dt = formats::format_id::m_bf16) {
  attention_case c;
  c.seq = s;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 128;
  c.mask = m;
  c.dtype = dt;
  c.seed = 53;
  return c;
}

void same_bits(const attention_output& a, const attention_output& b, const std::string& what) {
  ASSERT_EQ(a.o.size(), b.o.size()) << what;
  ASSERT_EQ(a.lse.size(), b.lse.size()) << what;
  std::size_t diff = 0;
  for (std::size_t i = 0; i < a.o.size(); ++i)
    diff += std::memcmp(&a.o[i], &b.o[i], sizeof(double)) != 0 ? 1 : 0;
  for (std::size_t i = 0; i < a.lse.size(); ++i)
    diff += std::memcmp(&a.lse[i], &b.lse[i], sizeof(double)) != 0 ? 1 : 0;
  EXPECT_EQ(diff, 0u) << what << ": elements differing between plugin and cuda";
}

TEST(gpu_plugin, loads_with_device_memory_and_kernel_tiles) {
  NUMPROBE_REQUIRE_GPU();
  auto p = plugin();
  EXPECT_EQ(p->metadata().at("memory"), "cuda");
  EXPECT_EQ(p->tiles().q, gpu_provider()->tiles().q);
  EXPECT_EQ(p->tiles().k, gpu_provider()->tiles().k);
}

TEST(gpu_plugin, same_numbers_as_cuda_backend_and_within_bound) {
  NUMPROBE_REQUIRE_GPU();
  auto plug = plugin();
  auto cuda = gpu_provider();
  std::vector<attention_case> cases;
  for (std::int64_t s : {1, 63, 64, 65, 127, 128, 129, 1000})
    for (mask_kind m : {mask_kind::m_none, mask_kind::m_causal}) cases.push_back(pcase(s, m));
  cases.push_back(pcase(777, mask_kind::m_causal, formats::format_id::m_f16));
  attention_case w = pcase(900, mask_kind::m_window);
  w.window = 100;
  cases.push_back(w);
  attention_case sc = pcase(500, mask_kind::m_causal);
  sc.softcap = 30.0;
  cases.push_back(sc);
  attention_case b2 = pcase(300, mask_kind::m_causal);
  b2.batch = 2;
  b2.queries = 40;  // T < S: bottom-right causal, some rows longer than others
  cases.push_back(b2);
  attention_case d64 = pcase(257, mask_kind::m_causal);
  d64.head_dim = 64;
  cases.push_back(d64);
  for (const attention_case& c : cases) {
    const attention_inputs in(c, false);
    const auto rows = test_rows(c, plug->tiles());
    const attention_output a = plug->run(in, rows);
    const attention_output b = cuda->run(in, rows);
    same_bits(a, b, c.id());
    const accuracy acc = measure(*plug, c);
    std::printf("[plugin] %s ratio_to_naive %.3f lse_bound_use %.3f\n", c.id().c_str(), acc.ratio(),
                acc.lse_bound_use);
    EXPECT_TRUE(acc.within_bound()) << c.id() << " ratio " << acc.ratio();
  }
}

TEST(gpu_plugin, unsupported_case_is_a_backend_error_naming_the_plugin) {
  NUMPROBE_REQUIRE_GPU();
  auto plug = plugin();
  attention_case c = pcase(100, mask_kind::m_causal);
  c.head_dim = 96;  // not compiled
  const attention_inputs in(c, false);
  try {
    (void)plug->run(in, std::vector<std::int64_t>{0});
    ADD_FAILURE() << "head_dim 96 accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend) << e.what();
    EXPECT_NE(std::string(e.what()).find("libnumprobe_cuda_plugin"), std::string::npos) << e.what();
  }
}


// ---------------------------------------------------------------- split-KV decode (issue 8)
// `--decode --splits N --backend plugin:libnumprobe_cuda_plugin.so` against `--decode --splits N
// --backend cuda`. Basis of bit equality: the plugin's numprobe_attention_decode launches the
// same decode_split + decode_merge kernels (flash_decode.cuh) with the same parameters — the
// T queries of one batch element as one launch with t = T, chunk = ceil(S / N), fp32 scale times
// log2 e — on the same bf16/f16 values; each (batch element, head) block is independent of the
// others and the kernels are deterministic (no atomics), so O and LSE must match exactly.

std::unique_ptr<attention_provider> decode_on(const std::string& backend, int splits) {
  provider_options o;
  o.backend = backend;
  o.knobs["decode"] = "1";
  o.knobs["splits"] = std::to_string(splits);
  return make_attention_provider(o);
}

TEST(gpu_plugin, decode_same_bits_as_cuda_decode) {
  NUMPROBE_REQUIRE_GPU();
  struct point {
    std::int64_t s, t;
    int splits;
    mask_kind m;
    formats::format_id dt;
  };
  const auto bf16 = formats::format_id::m_bf16, f16 = formats::format_id::m_f16;
  // Lengths crossing the split boundary (chunk = ceil(S / splits)) and the kernel's 128-key
  // tile, T = 1..8, splits > S (empty splits), causal with T close to S.
  const point points[] = {{1, 1, 4, mask_kind::m_none, bf16},     {127, 1, 4, mask_kind::m_none, bf16},
                          {128, 8, 4, mask_kind::m_causal, bf16}, {129, 5, 4, mask_kind::m_causal, bf16},
                          {513, 3, 4, mask_kind::m_none, f16},    {1000, 8, 7, mask_kind::m_causal, bf16},
                          {5, 4, 16, mask_kind::m_causal, bf16},  {6, 8, 64, mask_kind::m_none, bf16},
                          {4096, 2, 1, mask_kind::m_causal, f16}, {4097, 8, 32, mask_kind::m_causal, bf16}};
  for (const point& pt : points) {
    attention_case c = pcase(pt.s, pt.m, pt.dt);
    c.queries = pt.t;
    c.batch = 2;
    auto plug = decode_on(std::string("plugin:") + NUMPROBE_CUDA_PLUGIN_PATH, pt.splits);
    auto cuda = decode_on("cuda", pt.splits);
    const attention_inputs in(c, false);
    std::vector<std::int64_t> rows(static_cast<std::size_t>(c.batch * c.t()));
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
    const attention_output a = plug->run(in, rows);
    const attention_output b = cuda->run(in, rows);
    const std::string what = c.id() + " splits " + std::to_string(pt.splits);
    for (double x : a.o) ASSERT_FALSE(std::isnan(x)) << what << ": a poisoned element was not written";
    same_bits(a, b, what);
  }
}

TEST(gpu_plugin, decode_refusals_name_the_flag_or_the_function) {
  NUMPROBE_REQUIRE_GPU();
  // softcap: the decode kernel has none; the plugin says so (backend error naming the plugin).
  attention_case c = pcase(300, mask_kind::m_causal);
  c.queries = 2;
  c.softcap = 30.0;
  auto plug = decode_on(std::string("plugin:") + NUMPROBE_CUDA_PLUGIN_PATH, 4);
  try {
    (void)plug->run(attention_inputs(c, false), std::vector<std::int64_t>{0});
    ADD_FAILURE() << "softcap accepted by the plugin decode";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend) << e.what();
    EXPECT_NE(std::string(e.what()).find("numprobe_attention_decode"), std::string::npos) << e.what();
  }
  // --page-size has no field in numprobe_decode_params: exit 2 naming the flag.
  provider_options o;
  o.backend = std::string("plugin:") + NUMPROBE_CUDA_PLUGIN_PATH;
  o.knobs = {{"decode", "1"}, {"page-size", "16"}};
  try {
    (void)make_attention_provider(o);
    ADD_FAILURE() << "--page-size accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("--page-size", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace numprobe::gpu::testing
