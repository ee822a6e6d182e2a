// The double decode reference, its mask, and the reference's own paged-cache gather.
#include <fmt/format.h>

#include "reference/decode_impl.hpp"

namespace numprobe::reference {

key_range decode_visible_keys(const attention_case& c, std::int64_t length, std::int64_t t) {
  if (c.mask == mask_kind::m_none) return {0, length};
  if (c.mask != mask_kind::m_causal)
    throw_input_error("--mask", "decode supports mask none or causal (bottom-right)");
  const std::int64_t pos = length - c.t() + t;  // this query's absolute position
  const std::int64_t end = std::min(length, pos + 1);
  return {0, std::max<std::int64_t>(0, end)};
}

template attention_output decode_generic<double>(const attention_case&, std::span<const std::int64_t>,
                                                 std::span<const double>, std::span<const std::int64_t>,
                                                 std::span<const double>, std::span<const double>);

attention_output decode(const attention_case& c, std::span<const std::int64_t> lengths,
                        std::span<const double> q_rows, std::span<const std::int64_t> rows,
                        std::span<const double> k, std::span<const double> v) {
  return decode_generic<double>(c, lengths, q_rows, rows, k, v);
}

std::vector<double> gather_paged(const attention_case& c, std::span<const std::int64_t> lengths,
                                 std::span<const double> cache, std::span<const std::int32_t> block_table,
                                 std::int64_t pages_per_seq, std::int64_t page_size) {
  const std::int64_t S = c.seq, row = c.kv_heads * c.head_dim;
  if (page_size < 1) throw_input_error("--page-size", "must be positive");
  if (static_cast<std::int64_t>(block_table.size()) != c.batch * pages_per_seq)
    throw_input_error("block_table", "is not [batch, pages_per_seq]");
  const auto n_pages = static_cast<std::int64_t>(cache.size()) / (page_size * row);
  std::vector<double> out(static_cast<std::size_t>(c.batch * S * row), 0.0);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t j = 0; j < lengths[static_cast<std::size_t>(b)]; ++j) {
      const std::int64_t page = block_table[static_cast<std::size_t>(b * pages_per_seq + j / page_size)];
      if (page < 0 || page >= n_pages)
        throw_input_error("block_table", fmt::format("page {} outside the cache", page));
      const double* src = cache.data() + (page * page_size + j % page_size) * row;
      std::copy(src, src + row, out.data() + (b * S + j) * row);
    }
  return out;
}

}  // namespace numprobe::reference
