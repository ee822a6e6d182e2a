#pragma once
// Table and bit-manipulation codecs for the formats of at most 8 bits (fp8, fp6, fp4, e8m0,
// int8, int4, uint4), round-to-nearest-even only. They are what encode(), decode() and
// round_to() in codec.cpp run for those formats under RNE; the quantum-by-quantum codec
// (reference_*) stays the definition, and tests/formats/test_fast_codec.cpp proves the two
// equal bit for bit over dense samples of float and double inputs and every overflow policy.
//
// Private to numprobe_formats (and its tests): not installed.
#include <cstdint>

#include "numprobe/formats/format.hpp"

namespace numprobe::formats::detail {

// The quantum-by-quantum definitions (codec.cpp), under any rounding mode.
[[nodiscard]] std::uint32_t reference_encode(format_id id, double x, rounding r, overflow o,
                                             std::uint64_t random_bits);
[[nodiscard]] double reference_round_to(format_id id, double x, rounding r, overflow o,
                                        std::uint64_t random_bits);
[[nodiscard]] double reference_decode(format_id id, std::uint32_t code);

// True for the formats the RNE bit codec and the decode table cover.
[[nodiscard]] bool has_rne_bit_codec(format_id id);

// One-lookup forms for the hot paths: false (and `out` untouched) where the format is not
// covered.
[[nodiscard]] bool try_rne_bit_encode(format_id id, double x, overflow o, std::uint32_t& out);
[[nodiscard]] bool try_table_decode(format_id id, std::uint32_t code, double& out);

// RNE encode by integer rounding of the double's bit pattern (no libm calls). Only for
// has_rne_bit_codec(id) formats; equal to reference_encode(id, x, m_nearest_even, o, 0).
[[nodiscard]] std::uint32_t rne_bit_encode(format_id id, double x, overflow o);

// Decode by a table of every code (has_rne_bit_codec formats); equal to reference_decode.
[[nodiscard]] double table_decode(format_id id, std::uint32_t code);

}  // namespace numprobe::formats::detail
