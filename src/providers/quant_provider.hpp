#pragma once
// Quantize on a device and compare with the reference codec bit for bit (issue 4:
// `quant --backend cuda`). The built-in GPU quantize kernels (src/kernels/gpu/quantize*.cu) sit
// behind this small interface so that probes need no CUDA headers.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "numprobe/formats/scheme.hpp"
#include "src/providers/provider_registry.hpp"

namespace numprobe {

// What a device returned for one tensor, in the reference's terms (unpacked codes, one scale
// code per block of formats::grid_of, zero points, the NVFP4 tensor scale).
struct quant_device_output {
  std::vector<std::uint32_t> codes;
  std::vector<std::uint32_t> scale_codes;  // per block; a per-tensor scheme stores one
  std::vector<std::uint8_t> zero_points;   // asymmetric schemes
  double tensor_scale = 1.0;               // NVFP4 s_t (fp32)
  std::vector<double> dequant;             // exec: the optional dequant.npy (empty without)
  std::string dequant_dtype;               // its dtype (float32 or float64)
  double kernel_ms = 0.0, amax_ms = 0.0;
  std::string conversion;                  // how the device converts (hardware rule or software)
  // NaN/Inf the candidate wrote where a float is stored (scales, tensor scale, dequant): a
  // finding counted by the probe (exit 1), never a protocol error.
  std::int64_t nonfinite = 0;
};

class quant_provider {
 public:
  virtual ~quant_provider() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  // Empty when the device kernels cover this scheme, else the reason (for an input error).
  [[nodiscard]] virtual std::string unsupported(const formats::scheme_config& c) const = 0;
  // Quantizes a row-major [rows, cols] fp32 tensor. Throws input (exit 2) or backend (exit 3)
  // errors naming the flag or the failing call.
  [[nodiscard]] virtual quant_device_output quantize(const formats::scheme_config& c,
                                                     std::span<const float> x, std::int64_t rows,
                                                     std::int64_t cols) = 0;
  [[nodiscard]] virtual nlohmann::json metadata() const { return nlohmann::json::object(); }
};

// Settings of `--backend exec:'CMD'` for quant (examples/exec/README.md, "quant").
struct quant_exec_options {
  double timeout_s = 60.0;
  bool keep = false;         // keep the case directory (named in errors and in the metadata)
  std::string scheme_name;   // written to case.json as "scheme"
};

// "cuda" (and "hip" where built), or "exec:CMD": an external program judged by the same
// bit-for-bit check (x.npy + case.json in, codes.npy + scales.npy [+ zero_points.npy,
// tensor_scale.npy, dequant.npy] out). Throws a backend error (exit 3) when the backend is not
// compiled in or has no device, an input error (exit 2) for an unknown backend.
[[nodiscard]] std::unique_ptr<quant_provider> make_quant_provider(const std::string& backend,
                                                                  int device = 0,
                                                                  const quant_exec_options& exec = {});

using quant_provider_factory = std::unique_ptr<quant_provider> (*)(const std::string& backend, int device,
                                                                   const quant_exec_options& exec);
// The registered quantize backends (the device ones listed in every build).
[[nodiscard]] std::vector<backend_info> quant_backends();

// The exec quant provider (src/providers/exec_provider_quant.cpp); `backend` is "exec:CMD".
[[nodiscard]] std::unique_ptr<quant_provider> make_exec_quant_provider(const std::string& backend,
                                                                       const quant_exec_options& o);

struct quant_mismatch {
  std::string what;     // "element" | "scale" | "zero_point" | "tensor_scale"
  std::int64_t index = 0;   // element index, or block index
  double input = 0.0;       // the element (element rows), or the block amax (scale rows)
  std::uint32_t device_code = 0, reference_code = 0;
};

struct quant_bit_check {
  std::int64_t elements = 0, blocks = 0;
  std::int64_t element_mismatches = 0, scale_mismatches = 0, zero_point_mismatches = 0;
  bool tensor_scale_match = true;
  std::vector<quant_mismatch> listed;  // the first `max_listed`, elements first
  [[nodiscard]] bool exact() const {
    return element_mismatches == 0 && scale_mismatches == 0 && zero_point_mismatches == 0 &&
           tensor_scale_match;
  }
};

// Compares device output with formats::quantize run on the same (fp32) inputs.
[[nodiscard]] quant_bit_check compare_quant(const formats::quant_result& ref,
                                            const quant_device_output& dev,
                                            std::span<const double> input,
                                            std::size_t max_listed = 20);
[[nodiscard]] nlohmann::json to_json(const quant_bit_check& c);

}  // namespace numprobe
