// The cuda provider's flash-attention forward against the high-precision reference, on sampled
// rows, at lengths that cross the kernel's own tiles (k*B-1, k*B, k*B+1 up to 32K), T != S,
// GQA, sliding windows, softcap, fp16, D = 64, batches, and fully masked rows.
//
// Bounds and their basis:
//  - O: relative RMS error <= 2 x that of reference::attention_naive on the same rounded
//    inputs (FlashAttention's test criterion; see gpu_test_support.hpp). No NaN anywhere.
//  - LSE: |lse - lse_ref| <= 1e-3 + D * 2^-24 * |lse_ref| (basis in gpu_test_support.hpp:
//    fp32 scores and state; the relative term is the fp32 dot-product bound D * u_fp32).
//  - Fully masked rows (reference LSE = -inf): O exactly 0 and LSE exactly -inf.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/gpu/gpu_test_support.hpp"

namespace numprobe::gpu::testing {
namespace {

struct gpu_case {
  attention_case c;
  bool scalar = false;  // run the scalar (HIP) path on NVIDIA through --tile 64x64
  [[nodiscard]] std::string id() const { return (scalar ? "scalar_" : "") + c.id(); }
};

attention_case make(std::int64_t s, mask_kind mask, std::int64_t t = 0, std::int64_t hq = 4,
                    std::int64_t hkv = 2, std::int64_t d = 128) {
  attention_case c;
  c.seq = s;
  c.queries = t;
  c.heads = hq;
  c.kv_heads = hkv;
  c.head_dim = d;
  c.mask = mask;
  c.seed = 11;
  return c;
}

std::vector<gpu_case> cases() {
  std::vector<gpu_case> out;
  auto add = [&](attention_case c, bool scalar = false) { out.push_back({std::move(c), scalar}); };
  // Lengths around the key tile (64) and the query tile (128), and their multiples.
  for (std::int64_t s : {1, 2, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 4095,
                         4096, 4097}) {
    add(make(s, mask_kind::m_none));
    add(make(s, mask_kind::m_causal));
  }
  // Long contexts, up to 32K, sampled rows.
  for (std::int64_t s : {8191, 8192, 16385, 32767, 32768, 32769}) add(make(s, mask_kind::m_causal, 0, 2, 1));
  add(make(32768, mask_kind::m_none, 0, 2, 1));
  // T != S: bottom-right causal, top-left causal, and T > S (leading rows fully masked).
  for (auto [t, s] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {3, 128}, {1, 4097}, {100, 1000}, {129, 4097}, {1000, 100}, {200, 64}}) {
    add(make(s, mask_kind::m_causal, t));
    add(make(s, mask_kind::m_causal_top_left, t));
    add(make(s, mask_kind::m_none, t));
  }
  // GQA group sizes 1, 4, 7, 8 with a distinct constant V per KV head.
  for (auto [hq, hkv] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4, 4}, {8, 2}, {28, 4}, {8, 1}}) {
    attention_case c = make(1000, mask_kind::m_causal, 0, hq, hkv);
    add(c);
    c.dist = input_dist::m_constant_v;
    add(c);
  }
  // Sliding windows around the tile size, and their edges.
  for (std::int64_t w : {1, 63, 64, 65, 127, 128, 129, 1000}) {
    attention_case c = make(1500, mask_kind::m_window);
    c.window = w;
    add(c);
    c.queries = 300;
    add(c);
  }
  // Softcap, heavy-tailed inputs.
  for (double cap : {5.0, 30.0}) {
    attention_case c = make(2049, mask_kind::m_causal);
    c.softcap = cap;
    c.dist = input_dist::m_llm;
    add(c);
  }
  // Input families.
  for (input_dist d : {input_dist::m_uniform, input_dist::m_llm, input_dist::m_rescale_stress,
                       input_dist::m_max_first, input_dist::m_diffuse, input_dist::m_shifted}) {
    attention_case c = make(2048, mask_kind::m_causal);
    c.dist = d;
    add(c);
  }
  // fp16, D = 64, batch 2, explicit scale.
  for (std::int64_t s : {127, 1025}) {
    attention_case c = make(s, mask_kind::m_causal);
    c.dtype = formats::format_id::m_f16;
    add(c);
    attention_case d = make(s, mask_kind::m_causal, 0, 4, 2, 64);
    add(d);
  }
  {
    attention_case c = make(777, mask_kind::m_causal, 500);
    c.batch = 2;
    add(c);
    c.scale = 0.3;
    c.mask = mask_kind::m_none;
    add(c);
  }
  // The scalar path (the HIP kernel) on NVIDIA hardware.
  for (std::int64_t s : {63, 64, 65, 1025}) add(make(s, mask_kind::m_causal), true);
  {
    attention_case c = make(1000, mask_kind::m_window, 300, 8, 2);
    c.window = 65;
    add(c, true);
    attention_case d = make(100, mask_kind::m_causal, 200);
    add(d, true);
    d.dtype = formats::format_id::m_f16;
    d.softcap = 20.0;
    add(d, true);
  }
  return out;
}

void PrintTo(const gpu_case& c, std::ostream* os) { *os << c.id(); }

class gpu_attention : public ::testing::TestWithParam<gpu_case> {};

TEST_P(gpu_attention, within_twice_naive_error) {
  NUMPROBE_REQUIRE_GPU();
  const gpu_case& gc = GetParam();
  auto p = gpu_provider({}, gc.scalar ? std::optional<tile_shape>(tile_shape{64, 64}) : std::nullopt);
  const accuracy a = measure(*p, gc.c);
  const std::string what = fmt::format("{} on {}: rel_rms {:.3e}, naive {:.3e}, ratio {:.3f}, "
                                       "lse_max_abs {:.3e} ({:.2f} of bound), nan {}, masked rows {} (bad {})",
                                       p->name(), gc.c.id(), a.kernel, a.naive, a.ratio(),
                                       a.lse_max_abs, a.lse_bound_use, a.nan, a.masked_rows,
                                       a.masked_rows_bad);
  RecordProperty("ratio_to_naive", fmt::format("{:.4f}", a.ratio()));
  fmt::print("[accuracy] ratio_to_naive {:.4f} lse_bound_use {:.3f} {}\n", a.ratio(), a.lse_bound_use,
             gc.id());
  EXPECT_EQ(a.nan, 0u) << what;
  EXPECT_EQ(a.masked_rows_bad, 0u) << what;
  EXPECT_LE(a.kernel, 2.0 * a.naive) << what;
  EXPECT_LE(a.lse_bound_use, 1.0) << what;
}

INSTANTIATE_TEST_SUITE_P(cases, gpu_attention, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return sanitize(info.param.id()); });

}  // namespace
}  // namespace numprobe::gpu::testing
