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

namespace {

// One quantized tensor's arrays under `prefix`: codes, scales (as stored), zero points and the
// NVFP4 tensor scale where the scheme has them, and the dequantized values.
void write_result_arrays(const std::filesystem::path& d, const std::string& prefix, const formats::quant_result& q) {
  const std::vector<std::uint64_t> shape = {static_cast<std::uint64_t>(q.grid.rows),
                                            static_cast<std::uint64_t>(q.grid.cols)};
  const std::vector<std::uint64_t> grid = {static_cast<std::uint64_t>(q.grid.grid_rows),
                                           static_cast<std::uint64_t>(q.grid.grid_cols)};
  // Codes: one per element, in the narrowest unsigned type that holds the format's code.
  const int bits = formats::info(q.config.element).storage_bits;
  if (bits <= 8) {
    std::vector<std::uint8_t> c(q.codes.begin(), q.codes.end());
    io::write_npy(d / (prefix + "codes.npy"), shape, c);
  } else if (bits <= 16) {
    std::vector<std::uint16_t> c(q.codes.begin(), q.codes.end());
    io::write_npy(d / (prefix + "codes.npy"), shape, io::dtype::m_u16, as_bytes_of(c));
  } else {
    io::write_npy(d / (prefix + "codes.npy"), shape, io::dtype::m_u32, as_bytes_of(q.codes));
  }

  // Scales as stored: 8-bit scale formats as their codes, wider ones as float32 values (fp16
  // and bf16 values are exact in float32).
  const auto sf = q.config.scale_format;
  if (q.config.kind != formats::scheme_kind::m_none &&
      (sf == formats::format_id::m_e4m3fn || sf == formats::format_id::m_e8m0)) {
    std::vector<std::uint8_t> s;
    s.reserve(q.blocks.size());
    for (const auto& b : q.blocks) s.push_back(static_cast<std::uint8_t>(b.scale_code));
    io::write_npy(d / (prefix + "scales.npy"), grid, s);
  } else {
    std::vector<float> s;
    s.reserve(q.blocks.size());
    // NVFP4's effective scale folds in s_t; the stored block scale is scale / s_t.
    const double st = q.config.kind == formats::scheme_kind::m_nvfp4 ? q.tensor_scale : 1.0;
    for (const auto& b : q.blocks) s.push_back(static_cast<float>(b.scale / st));
    io::write_npy(d / (prefix + "scales.npy"), grid, s);
  }
  if (q.config.kind == formats::scheme_kind::m_asym) {
    std::vector<std::uint8_t> z;
    for (const auto& b : q.blocks) z.push_back(static_cast<std::uint8_t>(b.zero_point));
    io::write_npy(d / (prefix + "zero_points.npy"), grid, z);
  }
  if (q.config.kind == formats::scheme_kind::m_nvfp4) {
    const std::vector<float> st = {static_cast<float>(q.tensor_scale)};
    const std::vector<std::uint64_t> one = {1};
    io::write_npy(d / (prefix + "tensor_scale.npy"), one, st);
  }
  std::vector<float> dq(q.dequant.begin(), q.dequant.end());
  io::write_npy(d / (prefix + "dequant.npy"), shape, dq);
}

}  // namespace

void write_quant_dump(const quant_report& r, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_input_error("--dump", "cannot create '" + dir + "': " + ec.message());
  const fs::path d(dir);
  write_result_arrays(d, "", r.result);
  if (r.gemm.on) {
    // --gemm: X's quantization and the GEMM's outputs, for running the same operands through a
    // device GEMM (bench/quant_gemm_triton.py).
    write_result_arrays(d, "gemm_x_", r.gemm.x);
    const std::vector<std::uint64_t> y_shape = {static_cast<std::uint64_t>(r.gemm.tokens),
                                                static_cast<std::uint64_t>(r.gemm.n)};
    const std::vector<float> y(r.gemm.outputs.begin(), r.gemm.outputs.end());
    const std::vector<float> y32(r.gemm.fp32_outputs.begin(), r.gemm.fp32_outputs.end());
    io::write_npy(d / "gemm_y.npy", y_shape, y);
    io::write_npy(d / "gemm_y_fp32.npy", y_shape, y32);
  }
}

}  // namespace numprobe::probes
