#pragma once
// What every attention implementation (reference, emulator, GPU, plugin, exec) returns:
// O and the natural-log LSE for a chosen set of flat query rows.
#include <cstdint>
#include <limits>
#include <vector>

namespace numprobe {

struct attention_output {
  std::vector<std::int64_t> rows;  // flat rows b*T + t, in the order of o and lse
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::vector<double> o;    // [rows, Hq, D]
  std::vector<double> lse;  // [rows, Hq]; natural log; -inf for a fully masked row
  // False when the implementation gives no LSE at all (an exec kernel without lse.npy, a
  // plugin without NUMPROBE_FEATURE_LSE): lse is then NaN and is not judged. A NaN in a
  // given LSE is a finding, so the two must not be told apart by the values.
  bool lse_known = true;

  [[nodiscard]] double& o_at(std::size_t i, std::int64_t h, std::int64_t d) {
    return o[(i * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h)) *
                 static_cast<std::size_t>(head_dim) + static_cast<std::size_t>(d)];
  }
  [[nodiscard]] double o_at(std::size_t i, std::int64_t h, std::int64_t d) const {
    return o[(i * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h)) *
                 static_cast<std::size_t>(head_dim) + static_cast<std::size_t>(d)];
  }
};

// An output of the right size, every element poisoned with NaN so that an element a kernel
// forgets to write can never pass as a value (NUMERICS.md, test design rule 2).
[[nodiscard]] inline attention_output make_poisoned_output(std::vector<std::int64_t> rows,
                                                           std::int64_t heads,
                                                           std::int64_t head_dim) {
  attention_output out;
  out.heads = heads;
  out.head_dim = head_dim;
  out.o.assign(rows.size() * static_cast<std::size_t>(heads * head_dim),
               std::numeric_limits<double>::quiet_NaN());
  out.lse.assign(rows.size() * static_cast<std::size_t>(heads),
                 std::numeric_limits<double>::quiet_NaN());
  out.rows = std::move(rows);
  return out;
}

}  // namespace numprobe
