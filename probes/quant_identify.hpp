#pragma once
// `numprobe quant --identify DIR` (issue 17): which conventions another implementation used.
// DIR holds codes.npy (one element code per input element, or two fp4/int4 codes per byte,
// low nibble first) and optionally scales.npy (block scales as stored: 8-bit codes, or float
// values), written by that implementation for the same input. Every combination of the axes
// that apply to the scheme (formats::convention_variants) is quantized by the reference and
// compared with them.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/result.hpp"
#include "numprobe/formats/scheme.hpp"

namespace numprobe::probes {

struct quant_report;

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

// Reads DIR and compares. Throws numprobe::error (exit 2) naming the file on a missing
// codes.npy, a shape that matches neither layout, or an unreadable dtype.
[[nodiscard]] identify_result run_identify(const quant_report& base, const std::string& dir);

[[nodiscard]] nlohmann::json to_json(const identify_result& r);
// Adds the identification to a quant check: its view (one line per candidate, the match or the
// first mismatches), an `identify_match` gate (no match is a finding) and details["identify"].
void add_identify(const identify_result& r, result::check_result& out);

}  // namespace numprobe::probes
