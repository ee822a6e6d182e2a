#pragma once
// The file convention shared by `--backend exec:CMD`, the worker protocol and
// `attention --inputs DIR --candidate O.npy` (examples/exec/README.md documents it):
//   DIR/case.json  the case under the CLI's own names (seq, queries, heads, ...)
//   DIR/q.npy      [B*T, Hq, D]   float32 (float64 for f64 cases), values exact in the dtype
//   DIR/k.npy      [B*S, Hkv, D]
//   DIR/v.npy      [B*S, Hkv, D]
//   DIR/o.npy      [B*T, Hq, D]   written by the kernel: float32, float16, float64 or bf16
//   DIR/lse.npy    [B*T, Hq]      optional, natural log, -inf for fully masked rows
// With batch B > 1 the batch is concatenated along the first axis (flat row b*T + t, key
// b*S + s); [B, T, Hq, D] and [B, T, Hq] are accepted for the outputs as well.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/attention_output.hpp"
#include "numprobe/base/error.hpp"

namespace numprobe::exec {

inline constexpr int k_case_file_version = 1;

// A shape as messages print it: "[2, 3]".
[[nodiscard]] std::string shape_text(std::span<const std::uint64_t> s);

// case.json of a case (written by numprobe; read back by --inputs).
[[nodiscard]] nlohmann::json case_json(const attention_case& c);

// The case described by a case.json document. With a "case" id the id is parsed and the
// explicit fields must agree with it; without one the fields are read (seq, heads, kv_heads,
// head_dim, dtype required). Throws an input error naming `place` and the field.
[[nodiscard]] attention_case case_from_json(const nlohmann::json& j, const std::string& place);

// Writes q.npy, k.npy, v.npy and case.json of `in` into dir (which must exist).
void write_case_dir(const std::string& dir, const attention_inputs& in);

struct output_read_options {
  exit_code code = exit_code::m_backend;  // how failures are reported (exec: 3, dumps: 2)
  std::string who;         // prefix of messages, e.g. "exec backend, case attention(...)"
};

// Reads an attention output [B*T, Hq, D] (+ optional LSE) and returns the requested flat rows.
// Checks the file's dtype and shape. NaN and Inf values are read as they are: they are findings
// for the metrics (exit 1 with the report), not file errors. A missing lse gives NaN LSE with
// lse_known = false (LSE not judged).
[[nodiscard]] attention_output read_attention_output(const std::string& o_path,
                                                     const std::optional<std::string>& lse_path,
                                                     const attention_case& c,
                                                     std::span<const std::int64_t> rows,
                                                     const output_read_options& opts);

}  // namespace numprobe::exec
