// Quantize bandwidth on the device (run by scripts/gpu_check.sh), not a test: each kernel over a
// device-generated fp32 tensor of 1 GiB against a device-to-device copy of the same tensor,
// both timed in the same process (median of N). Bytes counted: fp32 read + codes + scales
// written (a copy: read + write). The amax pre-pass of per-tensor scales is timed apart and
// reported both ways (ratio: kernel alone; ratio_with_amax: amax pass + kernel).
//
//   gpu_quant_bench [--iters N] [--bytes B] [--scheme SUBSTRING] [--variants DIGITS]
//     N iterations (default 10) over B bytes of fp32 (default 1 GiB), the schemes whose name
//     contains SUBSTRING (default all), each launch variant in DIGITS (quant_variants.hpp;
//     default 01234, in the order given; 0 is the library's launch).
//   gpu_quant_bench check [--variants DIGITS]
//     the 128x128 launch variants (default 05678) against variant 1 (the register kernel that
//     the [quant-exact] tests check against the reference codec) on shapes with partial tiles,
//     16-byte aligned rows and odd row counts, which the tests' 131x301 (unaligned rows) does
//     not reach: codes and scales must be identical (exit 1 otherwise).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu_quant/quant_variants.hpp"
#include "src/kernels/gpu/gpu_api.hpp"

namespace {

// Seeded N(0,1) values with 1% outliers x 60, exact zeros, and NaN / +-inf in one row in 7.
std::vector<float> check_tensor(long long rows, long long cols, unsigned seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (long long r = 0; r < rows; ++r)
    for (long long c = 0; c < cols; ++c) {
      float v = n(g);
      const float p = u(g);
      if (p < 0.01f) v *= 60.f;
      else if (p < 0.02f) v = 0.f;
      if (r % 7 == 3 && p > 0.99f) v = p > 0.995f ? std::numeric_limits<float>::quiet_NaN()
                                                   : (p > 0.9925f ? 1.f : -1.f) * std::numeric_limits<float>::infinity();
      x[static_cast<std::size_t>(r * cols + c)] = v;
    }
  return x;
}

int check(const std::string& variants) {
  using namespace numprobe::gpu;
  using numprobe::bench::gpu_quant::quantize_variant;
  const long long shapes[][3] = {{256, 512, 128}, {131, 300, 128}, {257, 1028, 128}, {300, 260, 128},
                                 {64, 4096, 128}, {200, 644, 48}, {1, 4, 128}};
  int rc = 0;
  unsigned seed = 11;
  for (const auto& sh : shapes) {
    const std::vector<float> x = check_tensor(sh[0], sh[1], seed++);
    quant_request r;
    r.kind = quant_kind::m_block2d;
    r.elem = quant_elem::m_e4m3;
    r.scale = quant_scale::m_f32;
    r.rows = sh[0];
    r.cols = sh[1];
    r.block_rows = sh[2];
    r.block_cols = 128;
    r.x = x.data();
    const quant_device_result base = quantize_variant(1, r);
    for (char v : variants) {
      try {
        const quant_device_result d = quantize_variant(v - '0', r);
        long long bad = 0, bad_s = 0;
        for (std::size_t i = 0; i < base.codes.size(); ++i) bad += d.codes[i] != base.codes[i];
        for (std::size_t i = 0; i < base.scale_codes.size(); ++i) bad_s += d.scale_codes[i] != base.scale_codes[i];
        if (d.codes.size() != base.codes.size() || d.scale_codes.size() != base.scale_codes.size()) bad = -1;
        std::printf("check fp8-block%lldx128 %lldx%lld v%c vs v1: code mismatches %lld/%zu, scale mismatches %lld/%zu\n",
                    sh[2], sh[0], sh[1], v, bad, base.codes.size(), bad_s, base.scale_codes.size());
        if (bad != 0 || bad_s != 0) rc = 1;
      } catch (const std::exception& e) {
        std::printf("check %lldx%lld v%c FAILED: %s\n", sh[0], sh[1], v, e.what());
        rc = 1;
      }
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace numprobe::gpu;
  using numprobe::bench::gpu_quant::bandwidth_variant;
  const bool check_mode = argc > 1 && std::string(argv[1]) == "check";
  int iters = 10;
  long long bytes = 1ll << 30;
  std::string only, variants = check_mode ? "05678" : "01234";
  for (int i = check_mode ? 2 : 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--iters" && has_value && !check_mode) iters = std::atoi(argv[++i]);
    else if (a == "--bytes" && has_value && !check_mode) bytes = std::atoll(argv[++i]);
    else if (a == "--scheme" && has_value && !check_mode) only = argv[++i];
    else if (a == "--variants" && has_value) variants = argv[++i];
    else {
      std::fprintf(stderr, "gpu_quant_bench: unknown or incomplete argument '%s' (see the header of "
                           "bench/gpu_quant/gpu_quant_bench.cpp)\n", a.c_str());
      return 2;
    }
  }
  if (variants.empty() || variants.find_first_not_of("0123456789") != std::string::npos) {
    std::fprintf(stderr, "gpu_quant_bench: --variants expects digits 0..9, got '%s'\n", variants.c_str());
    return 2;
  }
  if (check_mode) {
    try {
      return check(variants);
    } catch (const std::exception& e) {  // no device, or the baseline launch failed
      std::fprintf(stderr, "gpu_quant_bench check: %s\n", e.what());
      return 3;
    }
  }
  struct item {
    const char* name;
    quant_request r;
  };
  const auto make = [](quant_kind k, quant_elem e, quant_scale s, long long bc) {
    quant_request r;
    r.kind = k;
    r.elem = e;
    r.scale = s;
    r.block_cols = bc;
    r.cols = 8192;
    return r;
  };
  quant_request act = make(quant_kind::m_row_block, quant_elem::m_e4m3, quant_scale::m_f32, 128);
  act.amax_floor = 1e-4;
  quant_request w2d = make(quant_kind::m_block2d, quant_elem::m_e4m3, quant_scale::m_f32, 128);
  w2d.block_rows = 128;
  const item items[] = {
      {"fp8-act1x128", act},
      {"fp8-block128", w2d},
      {"fp8-tensor", make(quant_kind::m_tensor, quant_elem::m_e4m3, quant_scale::m_f32, 128)},
      {"nvfp4", make(quant_kind::m_nvfp4, quant_elem::m_e2m1, quant_scale::m_e4m3, 16)},
      {"mxfp4", make(quant_kind::m_mx, quant_elem::m_e2m1, quant_scale::m_e8m0, 32)},
      {"int4-awq", make(quant_kind::m_asym, quant_elem::m_u4, quant_scale::m_f16, 128)},
  };
  int rc = 0;
  for (const auto& it : items) {
    if (std::string(it.name).find(only) == std::string::npos) continue;
    for (char vc : variants) {
      const int variant = vc - '0';
      try {
        const quant_bandwidth b = bandwidth_variant(variant, it.r, bytes, iters);
        // ratio: the quantize kernel alone against the copy; ratio_with_amax: including the
        // device amax pre-pass of per-tensor and NVFP4 scales (the same bytes over both times).
        const double with_amax = b.quant_bytes / ((b.quant_ms + b.amax_ms) * 1e6);
        std::printf("bench quant scheme=%s/v%d bytes=%lld quant_ms=%.4f amax_ms=%.4f copy_ms=%.4f "
                    "quant_gbs=%.1f copy_gbs=%.1f ratio=%.3f ratio_with_amax=%.3f\n",
                    it.name, variant, bytes, b.quant_ms, b.amax_ms, b.copy_ms, b.quant_gbs,
                    b.copy_gbs, b.copy_gbs > 0 ? b.quant_gbs / b.copy_gbs : 0.0,
                    b.copy_gbs > 0 ? with_amax / b.copy_gbs : 0.0);
      } catch (const std::exception& e) {
        std::printf("bench quant scheme=%s/v%d FAILED: %s\n", it.name, variant, e.what());
        rc = 1;
      }
    }
  }
  return rc;
}
