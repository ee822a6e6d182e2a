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

// Integer codes of a .npy array: 1-byte dtypes (u1, i1, and raw8, which numpy.save writes for
// ml_dtypes' float4/float8 arrays) byte by byte, wider unsigned ones by value.
std::vector<std::uint32_t> integer_codes(const io::tensor_view& t) {
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

// The element codes of another implementation, one per element: as given, or unpacked from
// two 4-bit codes per byte (low nibble first, the order of ModelOpt, compressed-tensors and
// gpt-oss) when the array is [rows, cols / 2] of a 4-bit format.
std::vector<std::uint32_t> their_codes(const io::tensor_view& t, std::int64_t rows, std::int64_t cols, int bits,
                                       bool& packed) {
  const auto n = static_cast<std::uint64_t>(rows * cols);
  if (t.element_count() == n) {
    packed = false;
    return integer_codes(t);
  }
  if (bits == 4 && cols % 2 == 0 && t.element_count() * 2 == n && one_byte(t)) {
    packed = true;
    std::vector<std::uint32_t> out(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < t.bytes.size(); ++i) {
      const auto b = std::to_integer<std::uint32_t>(t.bytes[i]);
      out[2 * i] = b & 0xFu;
      out[2 * i + 1] = b >> 4;
    }
    return out;
  }
  throw_input_error(t.place(), fmt::format("{} codes for a {}x{} input (expected {}, or {} bytes of packed 4-bit codes)",
                                           t.element_count(), rows, cols, n, n / 2));
}

identify_scales read_scales(const fs::path& p, const nf::quant_result& q) {
  identify_scales s;
  if (!fs::exists(p)) return s;
  const auto t = io::read_npy(p);
  if (t.element_count() != static_cast<std::uint64_t>(q.grid.count()))
    throw_input_error(t.place(), fmt::format("{} scales for a grid of {}x{} blocks", t.element_count(),
                                             q.grid.grid_rows, q.grid.grid_cols));
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
  const int bits = nf::info(q.config.element).storage_bits;
  bool packed = false;
  const auto theirs = their_codes(io::read_npy(d / "codes.npy"), rows, cols, bits, packed);
  const auto scales = read_scales(d / "scales.npy", q);
  auto out = identify_codes(q.config, base.input, rows, cols, theirs, scales, dir);
  out.packed = packed;
  return out;
}

}  // namespace numprobe::probes
