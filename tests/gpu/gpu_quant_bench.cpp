// Quantize bandwidth on the device (run by scripts/gpu_check.sh), not a test: each kernel over a
// device-generated fp32 tensor of 1 GiB against a device-to-device copy of the same tensor,
// both timed in the same process (median of N). Bytes counted: fp32 read + codes + scales
// written (a copy: read + write). The amax pre-pass of per-tensor scales is timed apart and
// reported both ways (ratio: kernel alone; ratio_with_amax: amax pass + kernel).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "src/kernels/gpu/gpu_api.hpp"

int main(int argc, char** argv) {
  using namespace numprobe::gpu;
  const int iters = argc > 1 ? std::atoi(argv[1]) : 10;
  const long long bytes = argc > 2 ? std::atoll(argv[2]) : (1ll << 30);
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
  // Launch variants (quantize.cu, g_variant): rows 0 quantize_rows_fast (the default: 5 blocks
  // per SM, 4 for NVFP4 / MX e2m1) / 1 quantize_rows, the previous default (the same-run
  // baseline) / 2, 3, 4 quantize_rows_fast at 4, 5, 6 blocks per SM; 2D tiles 0 tile in shared
  // memory x512 (the default) / 1 registers x512 (baseline) / 2 shared x256 / 3 shared x1024 /
  // 4 registers x512 with the Fast coding. Optional third argument: only schemes whose name
  // contains it; fourth: only these variants (digits, e.g. "01").
  const std::string only = argc > 3 ? argv[3] : "";
  const std::string variants = argc > 4 ? argv[4] : "01234";
  for (const auto& it : items) {
    if (std::string(it.name).find(only) == std::string::npos) continue;
    for (int variant = 0; variant < 5; ++variant) {
      if (variants.find(static_cast<char>('0' + variant)) == std::string::npos) continue;
      const std::string v = std::to_string(variant);
      setenv("NUMPROBE_QUANT_VARIANT", v.c_str(), 1);
      try {
        const quant_bandwidth b = cuda_quant_api().bandwidth(it.r, bytes, iters);
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
  unsetenv("NUMPROBE_QUANT_VARIANT");
  return rc;
}
