#include "probes/quant/quant_identify.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <map>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result_gates.hpp"
#include "numprobe/formats/conventions.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/dtype.hpp"
#include "numprobe/io/npy.hpp"
#include "probes/quant/quant_probe.hpp"

namespace numprobe::probes {
namespace {

namespace fs = std::filesystem;
namespace nf = formats;

bool one_byte(const io::tensor_view& t) { return io::bits(t.dtype) == 8; }

std::string dims_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Whether `shape` is [rows, cols] (or [cols] for a one-row input).
bool shape_is(const std::vector<std::uint64_t>& shape, std::int64_t rows, std::int64_t cols) {
  const auto r = static_cast<std::uint64_t>(rows), c = static_cast<std::uint64_t>(cols);
  return shape == std::vector<std::uint64_t>{r, c} || (rows == 1 && shape == std::vector<std::uint64_t>{c});
}

// Integer codes of a .npy array: 1-byte dtypes (u1, i1, and raw8, which numpy.save writes for
// ml_dtypes' float4/float8 arrays) byte by byte, wider unsigned ones by value. A bool array is
// no array of codes.
std::vector<std::uint32_t> integer_codes(const io::tensor_view& t) {
  if (t.dtype == io::dtype::m_bool)
    throw_input_error(t.place(), "a bool array: codes are unsigned integers (u1, u2, u4) or a 1-byte ml_dtypes array");
  std::vector<std::uint32_t> out(static_cast<std::size_t>(t.element_count()));
  if (one_byte(t)) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::to_integer<std::uint32_t>(t.bytes[i]);
    return out;
  }
  if (t.dtype != io::dtype::m_u16 && t.dtype != io::dtype::m_u32 && t.dtype != io::dtype::m_i32)
    throw_input_error(t.place(), "codes must be an unsigned integer array (u1, u2, u4) or a 1-byte ml_dtypes array");
  std::vector<double> v(out.size());
  t.decode(0, v);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!(v[i] >= 0 && v[i] < 4294967296.0)) throw_input_error(t.place(), fmt::format("code {} is not a code", v[i]));
    out[i] = static_cast<std::uint32_t>(v[i]);
  }
  return out;
}

// The element codes of another implementation, one per element of the [rows, cols] input: an
// array of that shape, or [rows, cols / 2] bytes of two 4-bit codes each (low nibble first, the
// order of ModelOpt, compressed-tensors and gpt-oss). Any other shape is refused, even one of
// the same count: a transposed or reshaped array would be compared element by element with
// other elements. Every code must be one of the format's (below 2^bits).
std::vector<std::uint32_t> their_codes(const io::tensor_view& t, std::int64_t rows, std::int64_t cols,
                                       nf::format_id element, bool& packed) {
  const int bits = nf::info(element).storage_bits;
  if (shape_is(t.shape, rows, cols)) {
    packed = false;
    auto out = integer_codes(t);
    const std::uint64_t limit = bits >= 32 ? std::uint64_t{1} << 32 : std::uint64_t{1} << bits;
    for (std::size_t i = 0; i < out.size(); ++i)
      if (out[i] >= limit)
        throw_input_error(t.place(), fmt::format("code {} (0x{:X}) at row {}, column {} is not a code of {} (a {}-bit "
                                                 "format: 0 to 0x{:X})",
                                                 out[i], out[i], static_cast<std::int64_t>(i) / cols,
                                                 static_cast<std::int64_t>(i) % cols, nf::name(element), bits,
                                                 limit - 1));
    return out;
  }
  if (bits == 4 && cols % 2 == 0 && shape_is(t.shape, rows, cols / 2) && one_byte(t) &&
      t.dtype != io::dtype::m_bool) {
    packed = true;
    std::vector<std::uint32_t> out(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < t.bytes.size(); ++i) {
      const auto b = std::to_integer<std::uint32_t>(t.bytes[i]);
      out[2 * i] = b & 0xFu;
      out[2 * i + 1] = b >> 4;
    }
    return out;
  }
  throw_input_error(t.place(),
                    fmt::format("shape {} ({}): the {}x{} input needs codes of shape [{}, {}]{}", dims_text(t.shape),
                                io::name(t.dtype), rows, cols, rows, cols,
                                bits == 4 && cols % 2 == 0
                                    ? fmt::format(", or [{}, {}] bytes of packed 4-bit codes", rows, cols / 2)
                                    : std::string()));
}

// The stored block scales: one per block of the grid, shaped as the grid; 1-byte codes of an
// 8-bit scale format, or the scales' values as floats. Integer arrays wider than a byte and
// bool arrays are neither.
identify_scales read_scales(const fs::path& p, const nf::quant_result& q) {
  identify_scales s;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(p, ec))) return s;
  const auto t = io::read_npy(p);
  if (!shape_is(t.shape, q.grid.grid_rows, q.grid.grid_cols))
    throw_input_error(t.place(), fmt::format("shape {}: the block grid is {}x{} ({} scales, one per block)",
                                             dims_text(t.shape), q.grid.grid_rows, q.grid.grid_cols, q.grid.count()));
  const auto d = t.dtype;
  const bool floating = d == io::dtype::m_f32 || d == io::dtype::m_f16 || d == io::dtype::m_bf16 || d == io::dtype::m_f64;
  const int scale_bits = nf::info(q.config.scale_format).storage_bits;
  if (d == io::dtype::m_bool || (!floating && !(one_byte(t) && scale_bits == 8)))
    throw_input_error(t.place(),
                      fmt::format("dtype {}: scales are their values (f32, f16, bf16, f64){}", io::name(d),
                                  scale_bits == 8 ? fmt::format(" or 1-byte {} codes (u1)", nf::name(q.config.scale_format))
                                                  : std::string()));
  s.given = true;
  s.as_codes = one_byte(t);
  if (s.as_codes) s.codes = integer_codes(t);
  else s.values = t.to_doubles();
  return s;
}

}  // namespace

identify_result run_identify(const quant_report& base, const std::string& dir) {
  const fs::path d(dir);
  if (!fs::is_directory(d)) throw_input_error("--identify", "'" + dir + "' is not a directory");
  if (!fs::exists(d / "codes.npy")) throw_input_error("--identify", "no codes.npy in '" + dir + "'");
  const auto& q = base.result;
  const std::int64_t rows = q.grid.rows, cols = q.grid.cols;
  bool packed = false;
  const auto theirs = their_codes(io::read_npy(d / "codes.npy"), rows, cols, q.config.element, packed);
  const auto scales = read_scales(d / "scales.npy", q);
  auto out = identify_codes(q.config, base.input, rows, cols, theirs, scales, dir);
  out.packed = packed;
  return out;
}

}  // namespace numprobe::probes
