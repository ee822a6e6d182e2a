#pragma once
// e4m3fn -> e4m3fnuz migration (AMD MI300), NUMERICS.md "Same bits, different value":
// an fn byte read as fnuz is worth half, 0x80 (-0 in fn) is fnuz's only NaN, and fn's NaNs
// (0x7F, 0xFF) read as fnuz are the numbers +-240. Two ways to migrate a tensor with scale s:
//   reuse the bits: rewrite 0x80 -> 0x00 and use scale 2s. Exact for every finite fn value.
//   re-encode the values with the same scale s: fn values in (240, 448] clip to 240; every
//     other finite fn value is exactly representable in fnuz (fnuz reaches 2^-10).
// The scale adjustment that avoids clipping when re-encoding is s x amax/240 (any factor
// >= that); the power of two 2 is exact, which is why the bit-reuse recipe doubles scales.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "numprobe/core/result.hpp"
#include <string>
#include <vector>

namespace numprobe::probes {

// What happens to one e4m3fn code.
struct fnuz_code_map {
  std::uint8_t fn_code = 0;
  double fn_value = 0.0;        // NaN for 0x7F, 0xFF
  double reinterpreted = 0.0;   // the same byte read as e4m3fnuz (0x80: NaN)
  std::uint8_t reuse_code = 0;  // the byte after the bit-reuse rewrite (0x80 -> 0x00)
  double reuse_value = 0.0;     // fnuz(reuse_code) x 2: equals fn_value for finite codes
  std::uint8_t reencoded_code = 0;  // fnuz code of fn_value at the same scale (saturating)
  double reencoded_value = 0.0;
  bool clips = false;        // |fn_value| > 240: re-encoding at the same scale clips it
  bool rewrite = false;      // 0x80, rewritten to 0x00
  bool nan_becomes_number = false;  // 0x7F, 0xFF: NaN in fn, +-240 in fnuz (x2: +-480)
};

[[nodiscard]] fnuz_code_map map_e4m3fn_code(std::uint8_t code);

struct fnuz_tensor_report {
  std::string name;
  std::int64_t elements = 0;
  std::int64_t zeros = 0;                // 0x00
  std::int64_t neg_zero_rewrites = 0;    // 0x80
  std::int64_t nan_codes = 0;            // 0x7F, 0xFF
  std::int64_t clip_same_scale = 0;      // |v| > 240
  std::int64_t change_bits = 0;          // finite non-zero codes: every one changes its byte
  double amax = 0.0;                     // of the fn values (unscaled)
  double scale_factor_no_clip = 1.0;     // max(1, amax / 240)
  std::string scale_tensor;              // the companion scale found by name ("" if none)
};

struct fnuz_report {
  std::string checkpoint;
  std::vector<fnuz_tensor_report> tensors;  // most clipped first
  fnuz_tensor_report total;
  std::vector<std::string> skipped;
  double seconds = 0.0;
};

// Scans every e4m3fn tensor (safetensors F8_E4M3) whose name matches `filter`.
[[nodiscard]] fnuz_report run_fnuz_migration(const std::string& checkpoint,
                                             const std::string& filter);

[[nodiscard]] nlohmann::json to_json(const fnuz_report& r);
// The migration as the result model: its JSON as the details, and its view (the first `top`
// tensors, the total and the two ways to migrate).
void fill_result(const fnuz_report& r, std::size_t top, result::check_result& out);

}  // namespace numprobe::probes
