#include "numprobe/formats/outlier_flushes.hpp"

#include "numprobe/formats/format.hpp"

namespace numprobe::formats {

double flush_ratio(const scheme_config& c) {
  const auto& e = info(c.element);
  if (c.kind == scheme_kind::m_asym) return 0.5;
  const double unit = (c.kind == scheme_kind::m_mx && c.element == format_id::m_i8) ? 0x1.0p-6 : 1.0;
  return 0.5 * (e.is_float ? e.min_subnormal : 1.0) * unit;
}

}  // namespace numprobe::formats
