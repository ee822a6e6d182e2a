#pragma once
// The host side of a kernel's 16-bit buffers: bf16 / fp16 bit patterns of doubles, and back.
// One encoder for every provider that hands a kernel bf16/fp16 memory (the built-in GPU
// kernels, plugins), so all of them see the same bits for the same case.
#include <cstdint>
#include <span>
#include <vector>

#include "numprobe/formats/format.hpp"

namespace numprobe {

// The bf16 or fp16 (`id`) code of x, bit for bit formats::encode(id, x): one round to nearest
// even from the double (no double rounding through float), NaN kept as a quiet NaN of its sign,
// overflow to +-inf. Normal results take a bit-manipulation path (a case's rounded inputs are
// all there); the codec does the rest.
[[nodiscard]] std::uint16_t encode16(formats::format_id id, double x);

// encode16 of every element of x into out (resized), on all cores.
void encode16_all(formats::format_id id, std::span<const double> x, std::vector<std::uint16_t>& out);

// The value of a bf16 / fp16 code, by a table of all 65536 codes (formats::decode).
[[nodiscard]] double decode16(formats::format_id id, std::uint16_t code);

}  // namespace numprobe
