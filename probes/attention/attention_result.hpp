#pragma once
// `numprobe attention`'s result model (and a scenario's attention check): one point of the
// attention probe (probes/point/attention_probe.hpp) as metrics, gates, tables and a view.
#include <vector>

#include "numprobe/core/bound.hpp"
#include "numprobe/core/result.hpp"
#include "probes/point/attention_probe.hpp"

namespace numprobe::probes {

// The result model of one point: every point metric with its unit, the non-finite gate and one
// gate per bound, the per-row error histogram, the worst rows, and to_json(p) as details. The
// caller sets the backend.
void fill_result(const attention_point& p, const std::vector<bound>& bounds, result::check_result& out);

}  // namespace numprobe::probes
