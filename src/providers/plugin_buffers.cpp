#include "src/providers/plugin_buffers.hpp"

#include <fmt/format.h>

#include <cmath>

#include "numprobe/formats/format.hpp"
#include "src/providers/host_dtype.hpp"

namespace numprobe::plugin {
namespace {
constexpr std::int64_t k_parallel_min = std::int64_t{1} << 16;
}  // namespace

std::string dtype_name(int d) {
  switch (d) {
    case NUMPROBE_DTYPE_F32: return "f32";
    case NUMPROBE_DTYPE_F16: return "f16";
    case NUMPROBE_DTYPE_BF16: return "bf16";
    case NUMPROBE_DTYPE_F64: return "f64";
    case NUMPROBE_DTYPE_E4M3FN: return "e4m3fn";
    case NUMPROBE_DTYPE_E5M2: return "e5m2";
    case NUMPROBE_DTYPE_E4M3FNUZ: return "e4m3fnuz";
    case NUMPROBE_DTYPE_E5M2FNUZ: return "e5m2fnuz";
    case NUMPROBE_DTYPE_U8: return "u8";
    case NUMPROBE_DTYPE_I32: return "i32";
    default: return fmt::format("dtype#{}", d);
  }
}

std::string dtype_list(std::uint32_t mask) {
  std::string out;
  for (int d = 0; d < 32; ++d)
    if (mask & (1u << d)) out += (out.empty() ? "" : ",") + dtype_name(d);
  return out.empty() ? "none" : out;
}

int abi_mask(mask_kind m) {
  switch (m) {
    case mask_kind::m_none: return NUMPROBE_MASK_NONE;
    case mask_kind::m_causal: return NUMPROBE_MASK_CAUSAL;
    case mask_kind::m_causal_top_left: return NUMPROBE_MASK_CAUSAL_TOP_LEFT;
    case mask_kind::m_window: return NUMPROBE_MASK_WINDOW;
    default: return -1;  // not an enumerator: -1 cast to numprobe_mask would be undefined
  }
}

numprobe_tensor dense(void* data, int dtype, std::initializer_list<std::int64_t> shape) {
  numprobe_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.scale = 1.0f;
  int i = 0;
  for (auto s : shape) t.shape[i++] = s;
  std::int64_t stride = 1;
  for (int k = t.ndim - 1; k >= 0; --k) {
    t.strides[k] = stride;
    stride *= t.shape[k];
  }
  return t;
}

std::size_t dtype_bytes(int d) {
  switch (d) {
    case NUMPROBE_DTYPE_F64: return 8;
    case NUMPROBE_DTYPE_F32: return 4;
    default: return 2;  // bf16, f16
  }
}

host_tensor::host_tensor(int dtype, std::span<const double> x)
    : m_dtype(dtype), m_bytes(x.size() * dtype_bytes(dtype)) {
  const auto n = static_cast<std::int64_t>(x.size());
#pragma omp parallel for schedule(static) if (n > k_parallel_min)
  for (std::int64_t i = 0; i < n; ++i) set(static_cast<std::size_t>(i), x[static_cast<std::size_t>(i)]);
}

host_tensor::host_tensor(int dtype, std::size_t n) : m_dtype(dtype), m_bytes(n * dtype_bytes(dtype)) {
  const auto m = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (m > k_parallel_min)
  for (std::int64_t i = 0; i < m; ++i) set(static_cast<std::size_t>(i), std::nan(""));
}

double host_tensor::at(std::size_t i) const {
  switch (m_dtype) {
    case NUMPROBE_DTYPE_F64: return load<double>(i);
    case NUMPROBE_DTYPE_F32: return static_cast<double>(load<float>(i));
    case NUMPROBE_DTYPE_BF16: return decode16(formats::format_id::m_bf16, load<std::uint16_t>(i));
    default: return decode16(formats::format_id::m_f16, load<std::uint16_t>(i));
  }
}

void host_tensor::set(std::size_t i, double x) {
  switch (m_dtype) {
    case NUMPROBE_DTYPE_F64: return store<double>(i, x);
    case NUMPROBE_DTYPE_F32: return store<float>(i, static_cast<float>(x));
    case NUMPROBE_DTYPE_BF16: return store<std::uint16_t>(i, encode16(formats::format_id::m_bf16, x));
    default: return store<std::uint16_t>(i, encode16(formats::format_id::m_f16, x));
  }
}

}  // namespace numprobe::plugin
