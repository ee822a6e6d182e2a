#include "reference/attention_common.hpp"

#include <fmt/format.h>

#include "numprobe/base/error.hpp"

namespace numprobe::reference::detail {

void check_attention_args(const attention_case& c, std::span<const double> q_rows,
                          std::span<const std::int64_t> rows, std::span<const double> k,
                          std::span<const double> v, std::string_view who) {
  c.validate();
  const auto per_row = static_cast<std::size_t>(c.heads * c.head_dim);
  if (q_rows.size() != rows.size() * per_row)
    throw_input_error(fmt::format("{}: q_rows", who),
                      fmt::format("expected {} rows x {} heads x {} dims = {} values, got {}",
                                  rows.size(), c.heads, c.head_dim, rows.size() * per_row,
                                  q_rows.size()));
  const auto kv = static_cast<std::size_t>(c.batch * c.seq * c.kv_heads * c.head_dim);
  if (k.size() != kv)
    throw_input_error(fmt::format("{}: k", who),
                      fmt::format("expected [B*S, Hkv, D] = {} values, got {}", kv, k.size()));
  if (v.size() != kv)
    throw_input_error(fmt::format("{}: v", who),
                      fmt::format("expected [B*S, Hkv, D] = {} values, got {}", kv, v.size()));
  for (const std::int64_t r : rows)
    if (r < 0 || r >= c.rows())
      throw_input_error(fmt::format("{}: rows", who),
                        fmt::format("row {} outside [0, {})", r, c.rows()));
}

}  // namespace numprobe::reference::detail
