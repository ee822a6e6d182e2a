#include "probes/kl/kl_precision_floor.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result.hpp"

namespace numprobe::probes {

std::optional<formats::format_id> sixteen_bit_format(io::dtype base) {
  if (base == io::dtype::m_bf16) return formats::format_id::m_bf16;
  if (base == io::dtype::m_f16) return formats::format_id::m_f16;
  return std::nullopt;
}

std::int64_t row_stride_for_floor(std::int64_t rows, std::int64_t vocab) {
  const std::int64_t budget_rows = std::max<std::int64_t>(1, k_floor_elements / std::max<std::int64_t>(1, vocab));
  return std::max<std::int64_t>(1, (rows + budget_rows - 1) / budget_rows);
}

double rounding_floor_kld(const io::tensor_view& block, std::uint64_t first, std::size_t vocab,
                          formats::format_id f, floor_scratch& s) {
  s.x.resize(vocab);
  s.rounded.resize(vocab);
  block.decode(first, s.x);
  // An f32 value is exactly a float, so the fast float path is the same exact RNE as round_to.
  const bool from_float = block.dtype == io::dtype::m_f32;
  for (std::size_t i = 0; i < vocab; ++i)
    s.rounded[i] = from_float ? static_cast<double>(formats::round_float_to(f, static_cast<float>(s.x[i])))
                              : formats::round_to(f, s.x[i]);
  metrics::kl_row r;
  if (!metrics::compare_row_checked(std::span<const double>(s.rounded), std::span<const double>(s.x), 1, -1,
                                    s.kl, r))
    return std::nan("");
  return r.kld;
}

kl_base_precision summarize_floor(io::dtype base, io::dtype cand, std::int64_t stride,
                                  const std::vector<double>& floors, double kld_mean) {
  kl_base_precision p;
  const auto f = sixteen_bit_format(base);
  if (!f) return p;
  p.format = std::string(io::name(base));
  p.row_stride = stride;
  if (cand != io::dtype::m_f32 && cand != io::dtype::m_f64) {
    p.floor_kld_mean = std::nan("");
    p.floor_kld_stderr = std::nan("");
    p.basis = fmt::format("not measured: the candidate is {}, no wider logits to round to {}",
                          io::name(cand), p.format);
    return p;
  }
  p.measured = true;
  p.rows_sampled = static_cast<std::int64_t>(floors.size());
  const auto m = metrics::mean_with_stderr(floors);
  p.floor_kld_mean = m.mean;
  p.floor_kld_stderr = m.stderr_;
  p.basis = fmt::format("mean KL(round_{}(cand) || cand) over {} rows (every {})", p.format, p.rows_sampled,
                        stride == 1 ? std::string("row") : fmt::format("{}th row", stride));
  p.at_floor = kld_mean < 2.0 * p.floor_kld_mean;
  return p;
}

std::optional<double> precision_metric(const kl_base_precision& p, double kld_mean, const std::string& name) {
  if (name.rfind("base_precision.", 0) != 0) return std::nullopt;
  if (name != "base_precision.floor_kld_mean" && name != "base_precision.mean_over_floor")
    throw_input_error("--bound", "unknown kl metric '" + name +
                                     "' (known: base_precision.floor_kld_mean, base_precision.mean_over_floor)");
  if (!p.measured)
    throw_input_error("--bound", "'" + name + "' needs a bf16 or f16 base and an f32 or f64 candidate" +
                                     (p.basis.empty() ? std::string() : " (" + p.basis + ")"));
  return name == "base_precision.floor_kld_mean" ? p.floor_kld_mean : kld_mean / p.floor_kld_mean;
}

nlohmann::json to_json(const kl_base_precision& p) {
  if (p.format.empty()) return nullptr;
  using result::json_number;
  return {{"format", p.format},
          {"measured", p.measured},
          {"floor_kld_mean", json_number(p.floor_kld_mean)},
          {"floor_kld_stderr", json_number(p.floor_kld_stderr)},
          {"rows_sampled", p.rows_sampled},
          {"row_stride", p.row_stride},
          {"basis", p.basis},
          {"at_floor", p.at_floor}};
}

}  // namespace numprobe::probes
