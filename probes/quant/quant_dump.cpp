// --dump DIR: the quantization as arrays, for diffing against another implementation
// (codes bit for bit, scales as stored, dequantized values).
#include <cstring>
#include <filesystem>
#include <system_error>

#include "numprobe/base/error.hpp"
#include "numprobe/io/npy.hpp"
#include "probes/quant/quant_probe.hpp"

namespace numprobe::probes {
namespace {

template <class T>
std::span<const std::byte> as_bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

}  // namespace

void write_quant_dump(const quant_report& r, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_input_error("--dump", "cannot create '" + dir + "': " + ec.message());
  const auto& q = r.result;
  const fs::path d(dir);
  const std::vector<std::uint64_t> shape = {static_cast<std::uint64_t>(q.grid.rows),
                                            static_cast<std::uint64_t>(q.grid.cols)};
  const std::vector<std::uint64_t> grid = {static_cast<std::uint64_t>(q.grid.grid_rows),
                                           static_cast<std::uint64_t>(q.grid.grid_cols)};

  // Codes: one per element, in the narrowest unsigned type that holds the format's code.
  const int bits = formats::info(q.config.element).storage_bits;
  if (bits <= 8) {
    std::vector<std::uint8_t> c(q.codes.begin(), q.codes.end());
    io::write_npy(d / "codes.npy", shape, c);
  } else if (bits <= 16) {
    std::vector<std::uint16_t> c(q.codes.begin(), q.codes.end());
    io::write_npy(d / "codes.npy", shape, io::dtype::m_u16, as_bytes_of(c));
  } else {
    io::write_npy(d / "codes.npy", shape, io::dtype::m_u32, as_bytes_of(q.codes));
  }

  // Scales as stored: 8-bit scale formats as their codes, wider ones as float32 values (fp16
  // and bf16 values are exact in float32).
  const auto sf = q.config.scale_format;
  if (q.config.kind != formats::scheme_kind::m_none &&
      (sf == formats::format_id::m_e4m3fn || sf == formats::format_id::m_e8m0)) {
    std::vector<std::uint8_t> s;
    s.reserve(q.blocks.size());
    for (const auto& b : q.blocks) s.push_back(static_cast<std::uint8_t>(b.scale_code));
    io::write_npy(d / "scales.npy", grid, s);
  } else {
    std::vector<float> s;
    s.reserve(q.blocks.size());
    // NVFP4's effective scale folds in s_t; the stored block scale is scale / s_t.
    const double st = q.config.kind == formats::scheme_kind::m_nvfp4 ? q.tensor_scale : 1.0;
    for (const auto& b : q.blocks) s.push_back(static_cast<float>(b.scale / st));
    io::write_npy(d / "scales.npy", grid, s);
  }
  if (q.config.kind == formats::scheme_kind::m_asym) {
    std::vector<std::uint8_t> z;
    for (const auto& b : q.blocks) z.push_back(static_cast<std::uint8_t>(b.zero_point));
    io::write_npy(d / "zero_points.npy", grid, z);
  }
  if (q.config.kind == formats::scheme_kind::m_nvfp4) {
    const std::vector<float> st = {static_cast<float>(q.tensor_scale)};
    const std::vector<std::uint64_t> one = {1};
    io::write_npy(d / "tensor_scale.npy", one, st);
  }
  std::vector<float> dq(q.dequant.begin(), q.dequant.end());
  io::write_npy(d / "dequant.npy", shape, dq);
}

}  // namespace numprobe::probes
