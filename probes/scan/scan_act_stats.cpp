// scan --act-stats (issue 17): the file of each input channel's mean square activation
// E[x_j^2], and each weight's statistics from it, validated before any tensor is scanned.
// Sizes come from the safetensors reader (io::safetensors_file), which checks every tensor's
// bytes against its dtype and shape; nothing here trusts the header beyond that.
#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "probes/scan/scan_bands.hpp"

namespace numprobe::probes::detail {
namespace {

constexpr std::string_view k_weight_suffix = ".weight", k_stats_suffix = ".input_sq_mean";

bool float_type(io::dtype d) {
  return d == io::dtype::m_f32 || d == io::dtype::m_f16 || d == io::dtype::m_bf16 || d == io::dtype::m_f64;
}

}  // namespace

scan_act_stats::scan_act_stats(const std::string& path)
    : m_path(path), m_file(io::safetensors_file::open(path)) {}

std::string scan_act_stats::key_of(const std::string& weight) const {
  if (m_file.find(weight)) return weight;
  if (weight.ends_with(k_weight_suffix)) {
    const std::string key = weight.substr(0, weight.size() - k_weight_suffix.size()) + std::string(k_stats_suffix);
    if (m_file.find(key)) return key;
  }
  return {};
}

std::vector<double> scan_act_stats::load(const std::string& key, const std::string& weight, std::int64_t cols) const {
  const io::tensor_view& v = m_file.at(key);
  const std::string place = "--act-stats " + m_path;
  if (!float_type(v.dtype))
    throw_input_error(place, fmt::format("'{}' (statistics of '{}') is {}; expected f32, f16, bf16 or f64", key,
                                         weight, io::name(v.dtype)));
  if (v.element_count() != static_cast<std::uint64_t>(cols))
    throw_input_error(place, fmt::format("'{}' holds {} values, but '{}' has {} input channels (its last dimension)",
                                         key, v.element_count(), weight, cols));
  // The cols values, then the 4 zeros metrics::output_weights_scope reads past the last column.
  std::vector<double> out(static_cast<std::size_t>(cols) + 4, 0.0);
  v.decode(0, std::span<double>(out.data(), static_cast<std::size_t>(cols)));
  for (std::int64_t j = 0; j < cols; ++j) {
    const double x = out[static_cast<std::size_t>(j)];
    if (!(x >= 0.0) || !std::isfinite(x))  // NaN fails x >= 0
      throw_input_error(place, fmt::format("'{}' (statistics of '{}') holds {} at channel {}: a mean square must be "
                                           "finite and >= 0",
                                           key, weight, x, j));
  }
  return out;
}

}  // namespace numprobe::probes::detail
