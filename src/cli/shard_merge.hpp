#pragma once
// Joining the documents of shards into one result: `numprobe merge` of files, and `--mpi`, whose
// rank 0 joins the ranks' documents (issue 32). One place, so that the two cannot differ.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "numprobe/core/result.hpp"

namespace numprobe::cli {

// `run --shard i/N` results (or ranks' runs): the checks put back in scenario order (shard i ran
// the selected checks i, i+N, ...); missing shards mark the result incomplete, with a warning.
// Throws numprobe::error (exit 2) naming the place of a part of another scenario or a repeat.
[[nodiscard]] result::run_result merge_run_documents(const std::vector<result::run_result>& parts,
                                                     const std::vector<std::string>& places);

// Whether `j` is a scan command document (`scan --json`).
[[nodiscard]] bool is_scan_document(const nlohmann::json& j);

// `scan --shard i/N` documents: the unsharded scan's result, and the exit code a scan would have
// (1 for NaN/Inf inputs unless the shards allowed them). Throws numprobe::error (exit 2) naming the
// place of a part that is not a shard of the same scan, a repeated or a missing shard.
struct merged_scan {
  result::check_result check;
  int exit_code = 0;
};
[[nodiscard]] merged_scan merge_scan_documents(const std::vector<nlohmann::json>& docs,
                                               const std::vector<std::string>& places);

}  // namespace numprobe::cli
