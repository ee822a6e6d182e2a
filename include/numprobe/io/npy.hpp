#pragma once
// NumPy .npy files: read (format versions 1, 2 and 3, little-endian, C order) and write.
//
// dtypes (the header's 'descr'):
//   '<f8' f64, '<f4' f32, '<f2' f16, '|i1' '<i2' '<i4' '<i8', '|u1' '<u2' '<u4' '<u8',
//   '|b1' bool.
//   '<V2' bf16: numpy.save of an ml_dtypes.bfloat16 array writes '<V2' (ml_dtypes 0.6 with
//         numpy 2.x); no other common writer produces a 2-byte void, so we read it as bf16.
//   '<f1' e5m2: what numpy.save writes for ml_dtypes.float8_e5m2.
//   '<V1' raw8: what numpy.save writes for every other ml_dtypes 8-bit type (float8_e4m3fn,
//         e4m3fnuz, e5m2fnuz, e8m0fnu, float6_*, float4_e2m1fn, int4, uint4). The file does
//         not say which, so the view's dtype is raw8 and the caller names the format with
//         tensor_view::reinterpret (load_tensor accepts "PATH@e4m3fn").
// Writing uses the same descr strings, so numpy reads our bf16 as '<V2' and
// `.view(ml_dtypes.bfloat16)` recovers it. Packed sub-byte dtypes cannot be written to .npy.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "numprobe/io/tensor_view.hpp"

namespace numprobe::io {

// Headers longer than this are refused before any allocation (numpy itself refuses more
// than 10000 bytes unless told otherwise; 1 MiB leaves room for very long shapes).
inline constexpr std::size_t k_npy_max_header_bytes = std::size_t{1} << 20;

// Parses and validates a whole .npy image; the view points into `file`.
[[nodiscard]] tensor_view parse_npy(std::shared_ptr<const mapped_file> file);

// Maps and parses a .npy file.
[[nodiscard]] tensor_view read_npy(const std::filesystem::path& path);

// Just the header (magic, version, length, padded dict) for `shape` x `type`, for writers
// that stream the data themselves. The data that follows must be shape x dtype bytes.
[[nodiscard]] std::vector<std::byte> npy_header(std::span<const std::uint64_t> shape, dtype type);

// The .npy image of a tensor (header + data). Throws (exit 2) when bytes.size() does not
// match shape x dtype or the dtype cannot be stored in .npy.
[[nodiscard]] std::vector<std::byte> npy_bytes(std::span<const std::uint64_t> shape, dtype type,
                                               std::span<const std::byte> bytes);

// Writes a .npy file atomically (temporary file + rename).
void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               dtype type, std::span<const std::byte> bytes);
void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               const std::vector<double>& values);
void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               const std::vector<float>& values);
void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               const std::vector<std::uint8_t>& values);

}  // namespace numprobe::io
