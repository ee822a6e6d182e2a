#pragma once
// Which conventions another implementation used (issue 17): its element codes (and block scales,
// as stored) against the reference's quantization of the same input under every combination of
// the axes that apply to the scheme (formats::convention_variants). Shared by `quant --identify`
// (probes/quant/quant_identify.hpp reads the codes from files) and the release probe (codes
// from a checkpoint).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/result.hpp"
#include "numprobe/formats/scheme.hpp"

namespace numprobe::probes {

struct identify_mismatch {
  std::int64_t row = 0, col = 0;  // element (a block's first element for a scale mismatch)
  bool scale = false;             // a block scale, not an element code
  double input = 0.0;             // the element (or the block's amax)
  std::uint32_t ours = 0, theirs = 0;
};

struct identify_candidate {
  formats::scheme_config config;
  std::string text;                   // formats::conventions_text
  std::int64_t code_mismatches = 0;   // elements whose code differs
  std::int64_t scale_mismatches = 0;  // blocks whose stored scale differs (with scales.npy)
  std::int64_t max_code_distance = 0; // largest |rank(ours) - rank(theirs)| in value order
  std::vector<identify_mismatch> first;  // the first mismatches, in order (at most 8)
  [[nodiscard]] bool matches() const { return code_mismatches == 0 && scale_mismatches == 0; }
};

struct identify_result {
  std::string dir;
  bool scales_given = false;
  bool packed = false;  // codes.npy held two 4-bit codes per byte
  std::vector<identify_candidate> candidates;  // convention_variants order (the base first)
  int match = -1;  // the first matching candidate, -1 for none (JSON: `matching` counts them all,
                   // `ambiguous` when more than one: the input does not separate them)
};

// Scales another implementation stored, one per block of the scheme's grid (formats::quantize
// block order): 8-bit codes, or exact float values of the stored scale (NVFP4: s_b, without s_t).
struct identify_scales {
  bool given = false, as_codes = false;
  std::vector<std::uint32_t> codes;
  std::vector<double> values;
};

// Compares codes (one per element of the [rows, cols] input, numprobe's code numbering) and
// scales with the reference's quantization of `input` under every convention variant of
// `base` (formats::convention_variants, the base first). `dir` is only recorded.
[[nodiscard]] identify_result identify_codes(const formats::scheme_config& base,
                                             const std::vector<double>& input, std::int64_t rows,
                                             std::int64_t cols, const std::vector<std::uint32_t>& theirs,
                                             const identify_scales& scales, const std::string& dir = "");

[[nodiscard]] nlohmann::json to_json(const identify_result& r);
// Adds the identification to a quant check: its view (one line per candidate, the match or the
// first mismatches), an `identify_match` gate (no match is a finding) and details["identify"].
void add_identify(const identify_result& r, result::check_result& out);

}  // namespace numprobe::probes
