// The GPU looped softmax kernel (`numprobe softmax --backend cuda`) against the double
// reference, vocabularies 1..256K crossing chunk boundaries, masks none/padding/first-chunk/all,
// and each of its three faults detected.
//
// Bound and its basis (first-order rounding analysis of the kernel in fp32, u = 2^-24; CUDA
// expf and logf are accurate to 2 ulp = 4u):
//  - l is a sum of V positive terms, each exp carrying 4u: within a chunk each thread adds its
//    entries sequentially (ceil(C / 256) terms) and a 256-thread tree adds the partial sums
//    (8 levels); across chunks l = alpha * l + cs costs alpha's exp (4u), a product and a sum,
//    6u per chunk. So l has relative error at most
//        B = (ceil(C / 256) + 8 + 6 * n_chunks + 16) * u     (16: the exps, with margin).
//  - z = x (softcap: cap * tanh(x / cap); then / temperature) and z - m are computed in fp32:
//    absolute error at most 4u (|z| + |m|), which is a relative error of exp(z - m).
//  So, with z_i and m = max z computed here in double from the same rounded logits:
//    |p - p_ref| <= (B + 4u (|z_i| + |m|)) p_ref + 2^-100 (expf's relative accuracy ends in
//                   the subnormals; the absolute term covers them),
//    |log p - log p_ref| <= B + 4u (|z_i| + |m| + |log l| + |log p_ref|),
//    |LSE - LSE_ref| <= B + 4u (|m| + |log l| + |LSE_ref|),
//    |CE - CE_ref| <= B + 4u (|z_t| + |m| + |log l| + |CE_ref|), with log l = LSE_ref - m.
//  Masked entries: p exactly 0 and log p exactly -inf; a fully masked row: LSE -inf, CE 0, no
//  NaN anywhere. Outputs are poisoned (NaN) before the launch, so a skipped element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/reference/softmax.hpp"
#include "src/providers/softmax_provider.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace numprobe::gpu::testing {
namespace {

struct scase {
  std::int64_t vocab;
  std::int64_t chunk;
  softmax_mask mask;
  std::int64_t masked = 0;
  double temperature = 1.0, softcap = 0.0;
  formats::format_id dtype = formats::format_id::m_bf16;
};

softmax_case make(const scase& s) {
  softmax_case c;
  c.vocab = s.vocab;
  c.rows = 3;
  c.mask = s.mask;
  c.masked = s.masked;
  c.temperature = s.temperature;
  c.softcap = s.softcap;
  c.dtype = s.dtype;
  c.seed = 71;
  c.validate();
  return c;
}

struct check_result {
  std::int64_t nan = 0, bad = 0, checked = 0;
  double worst_use = 0.0;  // max error / bound (<= 1 passes)
  double p_max_rel = 0.0;  // max |p - p_ref| / p_ref over p_ref >= 2^-100
  std::int64_t lse_inf_where_finite = 0;
};

check_result compare(const softmax_case& c, std::int64_t chunk, std::span<const double> x,
                     const softmax_output& got, const softmax_output& ref) {
  const double u = 0x1.0p-24;
  const std::int64_t n_chunks = (c.vocab + chunk - 1) / chunk;
  const double b = static_cast<double>((chunk + 255) / 256 + 8 + 6 * n_chunks + 16) * u;
  check_result r;
  const auto use = [&](double err, double allowed) {
    const double q = std::isnan(err) ? INFINITY : err / allowed;
    r.worst_use = std::max(r.worst_use, q);
    if (!(q <= 1.0)) ++r.bad;
  };
  const std::int64_t v = c.vocab;
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    const double* xr = x.data() + row * static_cast<std::size_t>(v);
    std::vector<double> z(static_cast<std::size_t>(v));
    double m = -INFINITY;
    for (std::int64_t i = 0; i < v; ++i) {
      double zi = xr[i];
      if (!std::isinf(zi)) {
        if (c.softcap > 0) zi = c.softcap * std::tanh(zi / c.softcap);
        zi /= c.temperature;
      }
      z[static_cast<std::size_t>(i)] = zi;
      m = std::max(m, zi);
    }
    const double lr = ref.lse[row], l = got.lse[row], e = got.ce[row], er = ref.ce[row];
    const double log_l = std::fabs(lr - m);
    for (std::int64_t i = 0; i < v; ++i) {
      const std::size_t k = row * static_cast<std::size_t>(v) + static_cast<std::size_t>(i);
      ++r.checked;
      const double p = got.p[k], pr = ref.p[k], lp = got.logp[k], lpr = ref.logp[k];
      if (std::isnan(p) || std::isnan(lp)) {
        ++r.nan;
        continue;
      }
      if (std::isinf(lpr)) {  // masked entry (or fully masked row)
        if (!(p == 0.0 && std::isinf(lp) && lp < 0)) ++r.bad;
        continue;
      }
      const double zi = std::fabs(z[static_cast<std::size_t>(i)]);
      if (pr >= 0x1.0p-100) r.p_max_rel = std::max(r.p_max_rel, std::fabs(p - pr) / pr);
      use(std::fabs(p - pr), (b + 4 * u * (zi + std::fabs(m))) * pr + 0x1.0p-100);
      use(std::fabs(lp - lpr), b + 4 * u * (zi + std::fabs(m) + log_l + std::fabs(lpr)));
    }
    if (std::isnan(l) || std::isnan(e)) {
      ++r.nan;
      continue;
    }
    if (std::isinf(lr)) {
      if (!(std::isinf(l) && l < 0 && e == 0.0)) ++r.bad;
      continue;
    }
    if (std::isinf(l)) ++r.lse_inf_where_finite;
    const std::int64_t t = softmax_target(c, ref.rows[row]);
    const double zt = t >= 0 ? std::fabs(z[static_cast<std::size_t>(t)]) : 0.0;
    use(std::fabs(l - lr), b + 4 * u * (std::fabs(m) + log_l + std::fabs(lr)));
    use(std::fabs(e - er), b + 4 * u * (zt + std::fabs(m) + log_l + std::fabs(er)));
  }
  return r;
}

std::unique_ptr<softmax_provider> kernel(std::int64_t chunk, std::vector<std::string> faults = {}) {
  softmax_provider_options o;
  o.backend = "cuda";
  o.chunk = chunk;
  o.faults = std::move(faults);
  return make_softmax_provider(o);
}

struct outputs {
  std::vector<double> x;
  softmax_output got, ref;
};

outputs run(softmax_provider& k, const softmax_case& c) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  const std::vector<double> x = softmax_logits(c, rows, true);
  softmax_output got = k.run(c, x, rows);
  softmax_output ref = reference::softmax(c, x, rows);
  return {x, std::move(got), std::move(ref)};
}

class gpu_softmax : public ::testing::TestWithParam<scase> {};

TEST_P(gpu_softmax, within_bound_of_reference) {
  NUMPROBE_REQUIRE_GPU();
  const scase& s = GetParam();
  const softmax_case c = make(s);
  auto k = kernel(s.chunk);
  const outputs o = run(*k, c);
  const check_result r = compare(c, s.chunk, o.x, o.got, o.ref);
  std::printf("[softmax] %s chunk=%lld bound_use %.3f p_max_rel %.3g\n", c.id().c_str(),
              static_cast<long long>(s.chunk), r.worst_use, r.p_max_rel);
  EXPECT_EQ(r.nan, 0) << c.id();
  EXPECT_EQ(r.bad, 0) << c.id() << " worst use of the bound " << r.worst_use;
  EXPECT_EQ(r.lse_inf_where_finite, 0) << c.id();
}

std::vector<scase> softmax_cases() {
  std::vector<scase> out;
  // Lengths around chunk boundaries (C = 1024: k*C - 1, k*C, k*C + 1) up to 256K, and tiny rows.
  for (std::int64_t v : {1, 2, 255, 256, 257, 1023, 1024, 1025, 4097, 65535, 131072, 262143, 262144, 262145})
    out.push_back({v, 1024, softmax_mask::m_none});
  out.push_back({128256, 4096, softmax_mask::m_none});
  out.push_back({100, 7, softmax_mask::m_none});  // chunk smaller than the block
  for (std::int64_t v : {1025, 128256}) {
    out.push_back({v, 1024, softmax_mask::m_padding});
    out.push_back({v, 1024, softmax_mask::m_prefix, 1024});      // the whole first chunk masked
    if (v > 2049) out.push_back({v, 1024, softmax_mask::m_prefix, 2049});  // two chunks and one more
    out.push_back({v, 1024, softmax_mask::m_all});
    out.push_back({v, 1024, softmax_mask::m_banned});
  }
  out.push_back({50000, 1024, softmax_mask::m_none, 0, 0.7, 30.0});  // temperature and softcap
  out.push_back({3000, 512, softmax_mask::m_none, 0, 1.0, 0.0, formats::format_id::m_f16});
  out.push_back({3000, 512, softmax_mask::m_padding, 0, 1.0, 0.0, formats::format_id::m_f32});
  return out;
}
INSTANTIATE_TEST_SUITE_P(cases, gpu_softmax, ::testing::ValuesIn(softmax_cases()),
                         [](const ::testing::TestParamInfo<scase>& i) {
                           return sanitize(make(i.param).id() + "_chunk_" + std::to_string(i.param.chunk));
                         });

// Each fault is detected: the case that exposes it fails the bound (or gives NaN / -inf) with
// the fault and passes without it.
TEST(gpu_softmax_faults, each_fault_is_detected) {
  NUMPROBE_REQUIRE_GPU();
  // no-empty-guard: a fully masked first chunk makes exp(-inf - -inf) = NaN.
  {
    const softmax_case c = make({5000, 1024, softmax_mask::m_prefix, 1024});
    auto good = kernel(1024);
    auto bad = kernel(1024, {"no-empty-guard"});
    const outputs g = run(*good, c);
    const check_result rg = compare(c, 1024, g.x, g.got, g.ref);
    EXPECT_EQ(rg.nan, 0);
    EXPECT_EQ(rg.bad, 0);
    const outputs o = run(*bad, c);
    const check_result r = compare(c, 1024, o.x, o.got, o.ref);
    std::printf("[softmax-fault] no-empty-guard: nan %lld of %lld\n", static_cast<long long>(r.nan),
                static_cast<long long>(r.checked));
    EXPECT_GT(r.nan, 0);
  }
  // rowsum-bf16: l in bf16 (relative error up to 2^-9 per update), far beyond B.
  {
    const softmax_case c = make({128256, 1024, softmax_mask::m_none});
    auto good = kernel(1024);
    auto bad = kernel(1024, {"rowsum-bf16"});
    const outputs g = run(*good, c), o = run(*bad, c);
    const check_result rg = compare(c, 1024, g.x, g.got, g.ref), rb = compare(c, 1024, o.x, o.got, o.ref);
    std::printf("[softmax-fault] rowsum-bf16: p_max_rel %.3g (clean %.3g), bound use %.1f\n",
                rb.p_max_rel, rg.p_max_rel, rb.worst_use);
    EXPECT_EQ(rg.bad, 0);
    EXPECT_GT(rb.bad, 0);
    EXPECT_GT(rb.p_max_rel, 8.0 * rg.p_max_rel);
  }
  // finite-sentinel: logits near -2e4 (dist shifted) never exceed the -1e4 start value, every
  // exp underflows, l = 0 and the row is reported fully masked (LSE -inf) though it is not.
  {
    softmax_case c = make({3000, 1024, softmax_mask::m_none});
    c.dist = input_dist::m_shifted;
    auto good = kernel(1024);
    auto bad = kernel(1024, {"finite-sentinel"});
    const outputs g = run(*good, c), o = run(*bad, c);
    const check_result rg = compare(c, 1024, g.x, g.got, g.ref), rb = compare(c, 1024, o.x, o.got, o.ref);
    std::printf("[softmax-fault] finite-sentinel: rows with LSE -inf %lld (clean %lld)\n",
                static_cast<long long>(rb.lse_inf_where_finite), static_cast<long long>(rg.lse_inf_where_finite));
    EXPECT_EQ(rg.bad, 0);
    EXPECT_EQ(rg.lse_inf_where_finite, 0);
    EXPECT_EQ(rb.lse_inf_where_finite, c.rows);
  }
}

// Options the kernel cannot honour are input errors naming the flag (no device needed).
TEST(gpu_softmax_options, refusals_name_the_flag) {
  const auto refused = [](softmax_provider_options o, const std::string& flag) {
    o.backend = "cuda";
    try {
      (void)make_softmax_provider(o);
      ADD_FAILURE() << "accepted " << flag;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), exit_code::m_input) << e.what();
      EXPECT_EQ(e.place(), flag) << e.what();
    }
  };
  softmax_provider_options o;
  o.faults = {"skip-rescale"};
  refused(o, "--inject");
  o = {};
  o.states = {{"l", "bf16"}};
  refused(o, "--state");
  o = {};
  o.chunk = 0;
  refused(o, "--chunk");
  o = {};
  o.exp2 = true;
  refused(o, "--exp2");
}

}  // namespace
}  // namespace numprobe::gpu::testing
