// JSON report: the result model's JSON (schema_version, tool version, git revision, machine,
// devices, seeds, every point in each check's details).
#include "reports/report_writer.hpp"

namespace numprobe::reports {

void json_writer::do_write(const result::run_result& r, std::ostream& out) const {
  out << result::to_json(r).dump(2) << '\n';
}

}  // namespace numprobe::reports
