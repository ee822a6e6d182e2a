#pragma once
// The rows a probe asks for, taken from a whole output (O [rows, Hq, D] and LSE [rows, Hq],
// float64, flat): the given candidate of compare_attention and the Python kernels of drift and
// audit both compute every row and hand back this subset, into poisoned storage.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/attention_output.hpp"

namespace numprobe::python {

[[nodiscard]] inline attention_output candidate_rows(std::span<const double> o,
                                                     std::optional<std::span<const double>> lse,
                                                     const attention_case& c,
                                                     std::span<const std::int64_t> rows) {
  attention_output out = make_poisoned_output({rows.begin(), rows.end()}, c.heads, c.head_dim);
  const auto row_o = static_cast<std::size_t>(c.heads * c.head_dim);
  const auto row_l = static_cast<std::size_t>(c.heads);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::size_t>(rows[i]);
    std::copy_n(o.begin() + static_cast<std::ptrdiff_t>(r * row_o), row_o,
                out.o.begin() + static_cast<std::ptrdiff_t>(i * row_o));
    if (lse)
      std::copy_n(lse->begin() + static_cast<std::ptrdiff_t>(r * row_l), row_l,
                  out.lse.begin() + static_cast<std::ptrdiff_t>(i * row_l));
  }
  out.lse_known = lse.has_value();
  return out;
}

}  // namespace numprobe::python
