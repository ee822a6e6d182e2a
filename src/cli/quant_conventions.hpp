#pragma once
// The quantization-convention flags (numprobe/formats/conventions.hpp), one set for every
// subcommand that quantizes (quant; scan can add the same set): --preset, --scale-division,
// --scale-floor, --scale-arith and --rule.
#include <string>

#include <CLI/CLI.hpp>

#include "numprobe/formats/scheme.hpp"

namespace numprobe::cli {

struct convention_flags {
  std::string preset, division, floor, arith, rule;  // empty: not given
};

// Adds the five options to `sub`.
void add_convention_flags(CLI::App* sub, convention_flags& f);

// Applies them to `c` (the scheme's defaults): the preset first, then each axis flag given,
// which overrides the preset's value. Throws numprobe::error (exit 2) naming the flag on an
// unknown value, and --rule on a scheme that is not MX; formats::validate refuses an NVFP4 axis
// on another scheme.
void apply_convention_flags(const convention_flags& f, formats::scheme_config& c);

}  // namespace numprobe::cli
