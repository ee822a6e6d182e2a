#pragma once
// What every attention implementation (reference, emulator, GPU, plugin, exec) returns:
// O and the natural-log LSE for a chosen set of flat query rows.
#include <cmath>
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
  // NaN/Inf the implementation wrote in rows it computed but was not asked for (GPU, plugin,
  // exec and Python kernels compute every row; the probe samples some): the probe adds them to
  // the candidate's counts, so a NaN outside the sampled rows is still a finding.
  struct unreturned {
    std::int64_t o_nan = 0, o_inf = 0, lse_nan = 0, lse_inf = 0;  // lse_inf: +inf only
    std::int64_t rows = 0;  // rows holding any of them
  } outside;

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

// Counts into out.outside the non-finite values of the rows of a whole output that out does not
// hold: o_at(i) is element i of O [total_rows, Hq, D], lse_at(i) element i of LSE [total_rows,
// Hq] (read only when out.lse_known). A -inf LSE is left alone: it is right for a row that sees
// no key, and telling which rows those are needs the case.
template <class OAt, class LseAt>
void count_unreturned_nonfinite(attention_output& out, std::int64_t total_rows, OAt o_at, LseAt lse_at) {
  std::vector<bool> returned(static_cast<std::size_t>(total_rows), false);
  for (const auto r : out.rows)
    if (r >= 0 && r < total_rows) returned[static_cast<std::size_t>(r)] = true;
  const auto row_o = static_cast<std::size_t>(out.heads * out.head_dim);
  const auto row_l = static_cast<std::size_t>(out.heads);
  for (std::size_t r = 0; r < returned.size(); ++r) {
    if (returned[r]) continue;
    bool any = false;
    for (std::size_t e = r * row_o; e < (r + 1) * row_o; ++e) {
      const double x = static_cast<double>(o_at(e));
      if (std::isnan(x)) ++out.outside.o_nan, any = true;
      else if (std::isinf(x)) ++out.outside.o_inf, any = true;
    }
    if (out.lse_known)
      for (std::size_t e = r * row_l; e < (r + 1) * row_l; ++e) {
        const double x = static_cast<double>(lse_at(e));
        if (std::isnan(x)) ++out.outside.lse_nan, any = true;
        else if (x == std::numeric_limits<double>::infinity()) ++out.outside.lse_inf, any = true;
      }
    out.outside.rows += any;
  }
}

}  // namespace numprobe
