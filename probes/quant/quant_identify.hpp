#pragma once
// `numprobe quant --identify DIR` (issue 17): DIR's codes.npy (and scales.npy) read and
// compared with the reference under every convention variant (probes/identify/identify.hpp).
#include <string>

#include "probes/identify/identify.hpp"

namespace numprobe::probes {

struct quant_report;

// Reads DIR and compares. Throws numprobe::error (exit 2) naming the file on a missing
// codes.npy, a shape that matches neither layout, or an unreadable dtype.
[[nodiscard]] identify_result run_identify(const quant_report& base, const std::string& dir);

}  // namespace numprobe::probes
