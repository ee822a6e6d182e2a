// Split-KV decode (flash-decoding) against the high-precision reference.
//
// Bounds and their basis:
//  - O: relative RMS error <= 2 x that of reference::attention_naive on the same inputs (the
//    bound of the forward kernel, gpu_test_support.hpp); LSE within 1e-3 + D 2^-24 |LSE|.
//  - Split invariance: splitting changes rounding legitimately (NUMERICS.md), so results for
//    different split counts are compared within a tolerance, not bit for bit. Each result is the
//    exact value perturbed by fp32 accumulation (relative error well below 2^-12 at these
//    lengths) and then rounded to bf16 (half an ulp, 2^-9 relative), so two results differ by at
//    most one bf16 ulp plus the fp32 part: |dO| <= 2^-7 |O| + 2^-16 max_row |O|. LSE: as above.
//  - Empty splits and all-empty rows: exact (O = 0, LSE = -inf, split LSE = -inf, no NaN),
//    with every output and the split workspace poisoned (NaN) before the launch.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace numprobe::gpu::testing {
namespace {

attention_case decode_case(std::int64_t t, std::int64_t s, mask_kind m, std::int64_t hq = 8,
                           std::int64_t hkv = 2, std::int64_t d = 128) {
  attention_case c;
  c.queries = t;
  c.seq = s;
  c.heads = hq;
  c.kv_heads = hkv;
  c.head_dim = d;
  c.mask = m;
  c.window = m == mask_kind::m_window ? std::max<std::int64_t>(1, s / 3) : 0;
  c.seed = 23;
  return c;
}

attention_mask gpu_mask(mask_kind m) {
  switch (m) {
    case mask_kind::m_causal: return attention_mask::m_causal;
    case mask_kind::m_causal_top_left: return attention_mask::m_causal_top_left;
    case mask_kind::m_window: return attention_mask::m_window;
    default: return attention_mask::m_none;
  }
}

struct decode_io {
  std::vector<float> q, k, v;
};

decode_request request(const attention_case& c, const decode_io& io, int splits) {
  decode_request r;
  r.batch = c.batch;
  r.t = c.t();
  r.s = c.seq;
  r.hq = c.heads;
  r.hkv = c.kv_heads;
  r.d = c.head_dim;
  r.fp16 = c.dtype == formats::format_id::m_f16;
  r.scale = static_cast<float>(c.softmax_scale());
  r.mask = gpu_mask(c.mask);
  r.window = c.window;
  r.splits = splits;
  r.q = io.q.data();
  r.k = io.k.data();
  r.v = io.v.data();
  return r;
}

decode_io inputs_of(const attention_inputs& in) {
  decode_io io;
  const auto q = in.q_all();
  io.q.assign(q.begin(), q.end());
  io.k.assign(in.k().begin(), in.k().end());
  io.v.assign(in.v().begin(), in.v().end());
  return io;
}

attention_output as_output(const attention_case& c, const decode_result& d) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  attention_output out = make_poisoned_output(rows, c.heads, c.head_dim);
  std::copy(d.o.begin(), d.o.end(), out.o.begin());
  std::copy(d.lse.begin(), d.lse.end(), out.lse.begin());
  return out;
}

// Accuracy of one decode result against the reference (every row).
accuracy check(const attention_case& c, std::span<const double> q, std::span<const double> k,
               std::span<const double> v, const attention_output& got) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(c.rows()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  const attention_output ref = reference::attention(c, q, rows, k, v);
  const attention_output naive = reference::attention_naive(c, q, rows, k, v);
  accuracy a;
  a.kernel = rel_rms(got, ref);
  a.naive = rel_rms(naive, ref);
  a.nan = count_nan(got);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::size_t li = i * static_cast<std::size_t>(c.heads) + static_cast<std::size_t>(h);
      const double lr = ref.lse[li], lg = got.lse[li];
      if (std::isinf(lr) && lr < 0) {
        ++a.masked_rows;
        bool zero = true;
        for (std::int64_t d = 0; d < c.head_dim; ++d) zero = zero && got.o_at(i, h, d) == 0.0;
        if (!zero || !(std::isinf(lg) && lg < 0)) ++a.masked_rows_bad;
      } else {
        const double err = std::abs(lg - lr);
        const double bound = 1e-3 + static_cast<double>(c.head_dim) * 0x1.0p-24 * std::abs(lr);
        a.lse_bound_use = std::max(a.lse_bound_use, std::isnan(err) ? INFINITY : err / bound);
      }
    }
  return a;
}

struct dcase {
  attention_case c;
  int splits;
};

class gpu_decode : public ::testing::TestWithParam<dcase> {};

TEST_P(gpu_decode, within_bound_of_reference) {
  NUMPROBE_REQUIRE_GPU();
  const dcase& p = GetParam();
  const attention_inputs in(p.c, false);
  const decode_io io = inputs_of(in);
  const decode_result d = cuda_decode_api().decode(request(p.c, io, p.splits));
  const auto q = in.q_all();
  const accuracy a = check(p.c, q, in.k(), in.v(), as_output(p.c, d));
  std::printf("[decode] %s splits=%d ratio_to_naive %.3f lse_bound_use %.3f masked %zu\n",
              p.c.id().c_str(), p.splits, a.ratio(), a.lse_bound_use, a.masked_rows);
  EXPECT_TRUE(a.within_bound()) << p.c.id() << " splits=" << p.splits << ": kernel " << a.kernel
                                << " naive " << a.naive << " lse use " << a.lse_bound_use
                                << " nan " << a.nan << " masked bad " << a.masked_rows_bad;
}

std::vector<dcase> decode_cases() {
  std::vector<dcase> out;
  for (std::int64_t t : {1, 4, 8})
    for (std::int64_t s : {1, 7, 128, 129, 1000, 4097})
      for (int splits : {1, 3, 16})
        for (mask_kind m : {mask_kind::m_none, mask_kind::m_causal})
          out.push_back({decode_case(t, s, m), splits});
  out.push_back({decode_case(8, 2000, mask_kind::m_window), 7});
  out.push_back({decode_case(8, 2000, mask_kind::m_causal_top_left), 5});
  out.push_back({decode_case(2, 3000, mask_kind::m_causal, 32, 8, 64), 4});  // D = 64, GQA 4
  out.push_back({decode_case(1, 16384, mask_kind::m_none, 8, 1), 32});       // long, GQA 8
  attention_case f16 = decode_case(4, 777, mask_kind::m_causal);
  f16.dtype = formats::format_id::m_f16;
  out.push_back({f16, 6});
  attention_case b2 = decode_case(3, 300, mask_kind::m_causal);
  b2.batch = 2;
  out.push_back({b2, 4});
  return out;
}
INSTANTIATE_TEST_SUITE_P(cases, gpu_decode, ::testing::ValuesIn(decode_cases()),
                         [](const ::testing::TestParamInfo<dcase>& i) {
                           return sanitize(i.param.c.id() + "_splits_" + std::to_string(i.param.splits));
                         });

TEST(gpu_decode_splits, split_invariance_within_tolerance) {
  NUMPROBE_REQUIRE_GPU();
  for (const attention_case& c : {decode_case(8, 4097, mask_kind::m_causal),
                                  decode_case(1, 1500, mask_kind::m_none, 4, 4)}) {
    const attention_inputs in(c, false);
    const decode_io io = inputs_of(in);
    const decode_result base = cuda_decode_api().decode(request(c, io, 1));
    for (int splits : {2, 5, 16, 64, 333}) {
      const decode_result d = cuda_decode_api().decode(request(c, io, splits));
      const std::int64_t hd = c.head_dim;
      std::int64_t bad = 0;
      for (std::size_t rh = 0; rh < base.lse.size(); ++rh) {
        double rmax = 0;
        for (std::int64_t e = 0; e < hd; ++e) rmax = std::max(rmax, std::fabs(static_cast<double>(base.o[rh * hd + e])));
        for (std::int64_t e = 0; e < hd; ++e) {
          const double a = base.o[rh * hd + e], b = d.o[rh * hd + e];
          const double tol = 0x1.0p-7 * std::max(std::fabs(a), std::fabs(b)) + 0x1.0p-16 * rmax;
          if (!(std::fabs(a - b) <= tol) && ++bad <= 3)
            ADD_FAILURE() << c.id() << " splits=" << splits << " (row,head) " << rh << " d " << e
                          << ": " << a << " vs " << b;
        }
        const double la = base.lse[rh], lb = d.lse[rh];
        const double ltol = 1e-3 + static_cast<double>(hd) * 0x1.0p-24 * std::fabs(la);
        if (!(std::fabs(la - lb) <= ltol) && ++bad <= 3)
          ADD_FAILURE() << c.id() << " splits=" << splits << " lse " << la << " vs " << lb;
      }
      EXPECT_EQ(bad, 0) << c.id() << " splits=" << splits;
    }
  }
}

// S = 3 keys, T = 8 bottom-right causal queries: rows 0..4 see no key (positions < 0), so every
// split is empty for them; with 4 and 16 splits some splits hold no key at all.
TEST(gpu_decode_splits, empty_splits_and_all_empty_rows_are_exact) {
  NUMPROBE_REQUIRE_GPU();
  const attention_case c = decode_case(8, 3, mask_kind::m_causal);
  const attention_inputs in(c, false);
  const decode_io io = inputs_of(in);
  for (int splits : {1, 4, 16}) {
    const decode_result d = cuda_decode_api().decode(request(c, io, splits));
    for (float x : d.o) ASSERT_FALSE(std::isnan(x)) << "splits=" << splits;
    for (float x : d.lse) ASSERT_FALSE(std::isnan(x)) << "splits=" << splits;
    for (float x : d.split_lse) ASSERT_FALSE(std::isnan(x)) << "split LSE, splits=" << splits;
    const std::int64_t hd = c.heads * c.head_dim;
    for (std::int64_t t = 0; t < 5; ++t) {
      for (std::int64_t e = 0; e < hd; ++e) ASSERT_EQ(d.o[t * hd + e], 0.f) << "row " << t;
      for (std::int64_t h = 0; h < c.heads; ++h)
        ASSERT_TRUE(std::isinf(d.lse[t * c.heads + h]) && d.lse[t * c.heads + h] < 0) << "row " << t;
    }
    // Splits beyond the keys (chunk = ceil(3 / splits)) report LSE = -inf for every row.
    const std::int64_t chunk = (3 + splits - 1) / splits;
    const std::int64_t nrow = c.rows() * c.heads;
    for (int sp = 0; sp < splits; ++sp) {
      if (sp * chunk < 3) continue;
      for (std::int64_t i = 0; i < nrow; ++i)
        ASSERT_TRUE(std::isinf(d.split_lse[sp * nrow + i])) << "split " << sp;
    }
    const auto q = in.q_all();
    const accuracy a = check(c, q, in.k(), in.v(), as_output(c, d));
    EXPECT_TRUE(a.within_bound()) << "splits=" << splits << " ratio " << a.ratio();
    EXPECT_EQ(a.masked_rows, static_cast<std::size_t>(5 * c.heads));
  }
}

// FP8 KV: e4m3 K/V codes with per-tensor and per-head scales, dequantized in the kernel as
// fp32(decode(code) * scale); the reference runs on exactly those dequantized values.
TEST(gpu_decode_splits, fp8_kv_per_tensor_and_per_head) {
  NUMPROBE_REQUIRE_GPU();
  const attention_case c = decode_case(4, 1025, mask_kind::m_causal, 8, 4, 128);
  const attention_inputs in(c, false);
  const decode_io io = inputs_of(in);
  for (kv_format kf : {kv_format::m_e4m3_tensor, kv_format::m_e4m3_head}) {
    const std::int64_t hkv = c.kv_heads, d = c.head_dim;
    const int ns = kf == kv_format::m_e4m3_head ? static_cast<int>(hkv) : 1;
    const auto quant = [&](const std::vector<float>& x, std::vector<std::uint8_t>& codes,
                           std::vector<float>& scales, std::vector<double>& deq) {
      scales.assign(static_cast<std::size_t>(ns), 0.f);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const int h = ns == 1 ? 0 : static_cast<int>((i / d) % hkv);
        scales[h] = std::max(scales[h], std::fabs(x[i]));
      }
      for (float& s : scales) s = s > 0 ? s / 448.f : 1.f;
      codes.resize(x.size());
      deq.resize(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        const int h = ns == 1 ? 0 : static_cast<int>((i / d) % hkv);
        codes[i] = static_cast<std::uint8_t>(formats::encode(
            formats::format_id::m_e4m3fn, static_cast<double>(x[i]) / scales[h],
            formats::rounding::m_nearest_even, formats::overflow::m_saturate));
        deq[i] = static_cast<float>(static_cast<float>(formats::decode(formats::format_id::m_e4m3fn, codes[i])) * scales[h]);
      }
    };
    std::vector<std::uint8_t> k8, v8;
    std::vector<float> ks, vs;
    std::vector<double> kd, vd;
    quant(io.k, k8, ks, kd);
    quant(io.v, v8, vs, vd);
    for (int splits : {1, 9}) {
      decode_request r = request(c, io, splits);
      r.kv = kf;
      r.k8 = k8.data();
      r.v8 = v8.data();
      r.k_scale = ks.data();
      r.v_scale = vs.data();
      const decode_result res = cuda_decode_api().decode(r);
      const auto q = in.q_all();
      const accuracy a = check(c, q, kd, vd, as_output(c, res));
      std::printf("[decode-fp8] %s kv=%s splits=%d ratio_to_naive %.3f\n", c.id().c_str(),
                  kf == kv_format::m_e4m3_head ? "per-head" : "per-tensor", splits, a.ratio());
      EXPECT_TRUE(a.within_bound()) << "kv " << static_cast<int>(kf) << " splits " << splits
                                    << " ratio " << a.ratio() << " lse " << a.lse_bound_use;
    }
  }
}

TEST(gpu_decode_splits, provider_option_runs_decode) {
  NUMPROBE_REQUIRE_GPU();
  provider_options o;
  o.backend = "cuda";
  o.knobs = {{"decode", "1"}, {"splits", "4"}};
  auto p = make_cuda_provider(o);
  EXPECT_NE(p->name().find("splits=4"), std::string::npos);
  const accuracy a = measure(*p, decode_case(2, 700, mask_kind::m_causal));
  EXPECT_TRUE(a.within_bound()) << a.ratio();
}

}  // namespace
}  // namespace numprobe::gpu::testing
