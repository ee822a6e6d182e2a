#pragma once
// Inline SVG for the HTML report: line plots (log or linear axes, tile boundaries, bound
// lines), histograms and heat maps. Marks carry classes (pt, bar, cell) that the page's
// self-check counts after rendering.
#include <string>

#include "numprobe/core/result.hpp"

namespace numprobe::reports::detail {

[[nodiscard]] std::string svg_curve(const result::curve& c);
[[nodiscard]] std::string svg_histogram(const result::histogram& h);
[[nodiscard]] std::string svg_heat_map(const result::heat_map& h);

}  // namespace numprobe::reports::detail
