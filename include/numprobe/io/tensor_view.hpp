#pragma once
// A tensor read from a file: its name, dtype, shape and a span of its bytes in the file's
// memory map. Copies of a view share the map and keep it alive; nothing is copied until a
// caller decodes.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "numprobe/io/dtype.hpp"
#include "numprobe/io/mapped_file.hpp"

namespace numprobe::io {

struct tensor_view {
  std::string name;                    // the tensor's name; empty for a .npy file
  io::dtype dtype = io::dtype::m_f32;
  std::vector<std::uint64_t> shape;    // C order (row-major); empty for a scalar
  std::span<const std::byte> bytes;    // exactly the tensor's bytes, validated against shape
  std::string source;                  // the file it came from
  std::shared_ptr<const mapped_file> owner;  // keeps `bytes` valid

  [[nodiscard]] std::uint64_t element_count() const;

  // "file.safetensors:name" or "file.npy": the place named in errors.
  [[nodiscard]] std::string place() const;

  // The same bytes read as another dtype of the same storage width, e.g. a .npy '<V1' array
  // (raw8, which ml_dtypes writes for every 8-bit float) as e4m3fn. Throws (exit 2) otherwise.
  [[nodiscard]] tensor_view reinterpret(io::dtype as) const;

  // Exact decode to double of elements [first, first + out.size()). 64-bit integers beyond
  // 2^53 round to the nearest double (the only inexact case). raw8 has no value: throws.
  void decode(std::uint64_t first, std::span<double> out) const;

  // The whole tensor as doubles. Allocates element_count() doubles.
  [[nodiscard]] std::vector<double> to_doubles() const;

  // Streams the tensor through `fn` in chunks of at most `chunk` doubles (one reused buffer),
  // so a pass over a tensor larger than RAM needs O(chunk) memory.
  void for_each_chunk(std::size_t chunk,
                      const std::function<void(std::uint64_t first, std::span<const double>)>& fn)
      const;
};

// Element count of a shape, overflow-checked. Throws (exit 2) naming `place` on overflow.
[[nodiscard]] std::uint64_t checked_element_count(std::span<const std::uint64_t> shape,
                                                  const std::string& place);

// Bytes that `count` elements of `type` occupy; throws on overflow or, for packed dtypes,
// when the bit count is not a whole number of bytes.
[[nodiscard]] std::uint64_t checked_byte_count(io::dtype type, std::uint64_t count,
                                               const std::string& place);

}  // namespace numprobe::io
