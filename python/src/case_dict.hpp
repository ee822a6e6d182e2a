#pragma once
// An attention case as a Python dict of its fields (batch, queries, seq, heads, kv_heads,
// head_dim, scale, dtype, mask, window, softcap, dist, logit_shift, seed), both ways. Unknown
// keys and bad values raise ValueError naming the key.
#include <nanobind/nanobind.h>

#include "numprobe/core/attention_case.hpp"

namespace numprobe::python {

[[nodiscard]] attention_case case_from_dict(const nanobind::dict& d);
[[nodiscard]] nanobind::dict case_to_dict(const attention_case& c);

}  // namespace numprobe::python
