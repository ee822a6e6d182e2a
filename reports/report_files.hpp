#pragma once
// Writes the reports a run asked for: every format into --out DIR, and single formats to their
// own paths (--json PATH ...; '-' is stdout). Files are written atomically (temp + rename), so a
// reader never sees half a report.
#include <map>
#include <string>

#include "numprobe/core/result.hpp"

namespace numprobe::reports {

struct report_targets {
  std::string out_dir;                       // empty: none
  std::map<std::string, std::string> paths;  // format name (json, junit, md, csv, html) -> PATH
};

// Before any work: two reports to one path (or both to stdout), a path that is a folder, or a
// folder that does not exist are input errors (exit 2) naming the flags.
void check_report_targets(const report_targets& t);

// Throws numprobe::error (exit 2) naming the path on failure; the reports this call had
// already written are then removed (none is left recording another outcome).
void write_reports(const result::run_result& r, const report_targets& t);

}  // namespace numprobe::reports
