// The cuda provider's contract: tiles, row handling, metadata, option errors (exit 2), device
// errors (exit 3), and poisoned outputs. The no-device test runs where there is no GPU (CI).
#include <gtest/gtest.h>

#include <limits>

#include "numprobe/base/error.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace numprobe::gpu::testing {
namespace {

exit_code code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const numprobe::error& e) {
    return e.code();
  }
  return exit_code::m_ok;
}

TEST(gpu_provider, without_device_fails_with_backend_error) {
#if NUMPROBE_HAVE_CUDA
  if (have_device()) GTEST_SKIP() << "a device is present";
  try {
    (void)gpu_provider();
    FAIL() << "expected a backend error";
  } catch (const numprobe::error& e) {
    EXPECT_EQ(e.code(), exit_code::m_backend);
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(cuda_devices().empty());
#else
  GTEST_SKIP() << "CUDA not compiled in";
#endif
}

TEST(gpu_provider, reports_tiles_and_metadata) {
  NUMPROBE_REQUIRE_GPU();
  auto p = gpu_provider();
  EXPECT_EQ(p->name(), "cuda");
  EXPECT_EQ(p->tiles().q, 128);
  EXPECT_EQ(p->tiles().k, 64);
  EXPECT_FALSE(p->computes_row_subsets());
  const nlohmann::json m = p->metadata();
  EXPECT_FALSE(m["device"]["name"].get<std::string>().empty());
  EXPECT_EQ(m["device"]["arch"].get<std::string>().rfind("sm_", 0), 0u);
  EXPECT_GT(m["device"]["warp_width"].get<int>(), 0);
  EXPECT_GT(m["device"]["memory_bytes"].get<std::int64_t>(), 0);
  EXPECT_GT(m["device"]["driver_version"].get<int>(), 0);
  EXPECT_NE(m["numerics"]["exp"].get<std::string>().find("ex2"), std::string::npos);
  EXPECT_NE(m["numerics"]["mma"].get<std::string>().find("f32"), std::string::npos);
  auto s = gpu_provider({}, tile_shape{64, 64});
  EXPECT_EQ(s->name(), "cuda[tile=64x64]");
  EXPECT_EQ(s->tiles().q, 64);
  EXPECT_EQ(gpu_provider({"stale-max"})->name(), "cuda[inject=stale-max]");
  const auto devs = cuda_devices();
  ASSERT_FALSE(devs.empty());
  EXPECT_EQ(devs[0]["name"], m["device"]["name"]);
}

TEST(gpu_provider, rejects_options_it_cannot_honour) {
  NUMPROBE_REQUIRE_GPU();
  EXPECT_EQ(code_of([] { (void)gpu_provider({}, tile_shape{32, 32}); }), exit_code::m_input);
  EXPECT_EQ(code_of([] { (void)gpu_provider({"no-such-fault"}); }), exit_code::m_input);
  EXPECT_EQ(code_of([] { (void)gpu_provider({"skip-rescale", "stale-max"}); }), exit_code::m_input);
  EXPECT_EQ(code_of([] {
              provider_options o;
              o.backend = "cuda";
              o.states["l"] = "bf16";
              (void)make_cuda_provider(o);
            }),
            exit_code::m_input);
  EXPECT_EQ(code_of([] {
              provider_options o;
              o.backend = "cuda";
              o.device = 1000;
              (void)make_cuda_provider(o);
            }),
            exit_code::m_backend);
  attention_case c;
  c.seq = 64;
  c.dtype = formats::format_id::m_f32;
  auto p = gpu_provider();
  EXPECT_EQ(code_of([&] {
              const attention_inputs in(c, false);
              const std::vector<std::int64_t> rows{0};
              (void)p->run(in, rows);
            }),
            exit_code::m_input);
  c.dtype = formats::format_id::m_bf16;
  c.head_dim = 96;
  EXPECT_EQ(code_of([&] {
              const attention_inputs in(c, false);
              const std::vector<std::int64_t> rows{0};
              (void)p->run(in, rows);
            }),
            exit_code::m_input);
}

// Returns exactly the requested rows, in the requested order, every element written: the
// device output is poisoned with NaN before the launch, so an unwritten element reads NaN.
TEST(gpu_provider, returns_requested_rows_all_written) {
  NUMPROBE_REQUIRE_GPU();
  attention_case c;
  c.seq = 300;
  c.queries = 1000;  // T > S causal: rows 0..699 fully masked, their blocks see no key tile
  c.heads = 4;
  c.kv_heads = 2;
  c.mask = mask_kind::m_causal;
  const attention_inputs in(c, false);
  const std::vector<std::int64_t> rows{999, 0, 700, 699, 5, 998};
  auto p = gpu_provider();
  const attention_output out = p->run(in, rows);
  EXPECT_EQ(out.rows, rows);
  ASSERT_EQ(out.o.size(), rows.size() * 4 * 128);
  EXPECT_EQ(count_nan(out), 0u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const bool masked = rows[i] < 700;
    for (std::int64_t h = 0; h < 4; ++h) {
      const double lse = out.lse[i * 4 + static_cast<std::size_t>(h)];
      if (masked) {
        EXPECT_TRUE(std::isinf(lse) && lse < 0) << "row " << rows[i];
        for (std::int64_t d = 0; d < 128; ++d) EXPECT_EQ(out.o_at(i, h, d), 0.0);
      } else {
        EXPECT_TRUE(std::isfinite(lse)) << "row " << rows[i];
      }
    }
  }
  // The same rows from a second run agree bit for bit (deterministic kernel, fresh poison).
  const attention_output again = p->run(in, rows);
  EXPECT_EQ(again.o, out.o);
  EXPECT_EQ(again.lse, out.lse);
}

// Issue 27 item 5: NaN/Inf in rows the kernel computed but the probe did not sample are counted
// on the device (attention_output::outside), as the plugin and exec providers count them. The
// fault no-empty-guard makes every fully masked row's O NaN (exp(-inf - -inf)): 700 rows of 4
// heads x D = 128. Its LSE is NaN in some of those rows and -inf in others, so the expected LSE
// count is read off a run that returns every row: the device's count of the rows it did not
// return must equal the host's count of the same rows returned.
TEST(gpu_provider, counts_nonfinite_in_the_rows_it_did_not_return) {
  NUMPROBE_REQUIRE_GPU();
  attention_case c;
  c.seq = 300;
  c.queries = 1000;  // rows 0..699 see no key
  c.heads = 4;
  c.kv_heads = 2;
  c.mask = mask_kind::m_causal;
  const attention_inputs in(c, false);
  const std::vector<std::int64_t> rows{999, 700, 850};
  const attention_output healthy = gpu_provider()->run(in, rows);
  EXPECT_EQ(healthy.outside.rows, 0);
  EXPECT_EQ(healthy.outside.o_nan + healthy.outside.o_inf + healthy.outside.lse_nan + healthy.outside.lse_inf, 0);
  auto faulty = gpu_provider({"no-empty-guard"});
  const attention_output bad = faulty->run(in, rows);
  EXPECT_EQ(count_nan(bad), 0u) << "the sampled rows see keys";
  std::vector<std::int64_t> every(1000);
  std::iota(every.begin(), every.end(), 0);
  const attention_output all = faulty->run(in, every);
  EXPECT_EQ(all.outside.rows, 0);
  std::int64_t o_nan = 0, lse_nan = 0, o_inf = 0, lse_inf = 0;
  for (std::int64_t r = 0; r < 700; ++r)
    for (std::int64_t h = 0; h < 4; ++h) {
      const double l = all.lse[static_cast<std::size_t>(r * 4 + h)];
      lse_nan += std::isnan(l);
      lse_inf += l == std::numeric_limits<double>::infinity();
      for (std::int64_t d = 0; d < 128; ++d) {
        const double x = all.o_at(static_cast<std::size_t>(r), h, d);
        o_nan += std::isnan(x);
        o_inf += std::isinf(x);
      }
    }
  EXPECT_EQ(o_nan, 700 * 4 * 128) << "every element of a fully masked row";
  EXPECT_EQ(bad.outside.rows, 700);
  EXPECT_EQ(bad.outside.o_nan, o_nan);
  EXPECT_EQ(bad.outside.o_inf, o_inf);
  EXPECT_EQ(bad.outside.lse_nan, lse_nan);
  EXPECT_EQ(bad.outside.lse_inf, lse_inf);
}

}  // namespace
}  // namespace numprobe::gpu::testing
