#pragma once
// Flags shared by the attention-case subcommands (attention, drift, later bisect): the case,
// the backend under test, sampling, bounds and outputs.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/core/attention_case.hpp"
#include "numprobe/core/bound.hpp"
#include "numprobe/core/row_sampling.hpp"
#include "src/cli/report_output.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::cli {

struct case_flags {
  std::string backend = "emu";
  std::string seq = "1024";  // attention: S; drift: A..B
  std::int64_t queries = 0;
  std::int64_t batch = 1;
  std::int64_t heads = 8;
  std::int64_t kv_heads = 2;
  std::int64_t head_dim = 128;
  double scale = 0.0;
  std::string dtype = "bf16";
  std::string mask = "causal";
  std::int64_t window = 0;
  double softcap = 0.0;
  std::string dist = "normal";
  double shift = -2.0e4;
  std::uint64_t seed = 7;
  std::string tile;
  std::vector<std::string> states;
  std::vector<std::string> inject;
  std::string rows = "auto";
  std::string case_id;
  std::vector<std::string> bounds;
  report_flags out;  // --json, --csv, --md, --html, --junit
  bool force_rescale = false;
  bool no_e2e = false;
  bool no_default_bound = false;  // --no-default-bound (attention, drift)
  int device = 0;
  // bring your own kernel (issue 8)
  double exec_timeout = 60.0;  // --exec-timeout SECONDS
  bool exec_worker = false;    // --exec-worker
  bool keep = false;           // --keep
  std::string inputs;          // attention --inputs DIR (dumped tensors; nothing is run)
  std::string candidate;       // attention --candidate O.npy
  // serving numerics (issue 9): split-KV decode and fp8 attention (emu backend)
  bool decode = false;           // --decode: T = --queries (1..8) over S cached keys
  // --splits N and --page-size P; drift also takes comma lists (one sweep per combination).
  std::vector<std::int64_t> splits;
  std::int64_t split_size = 0;   // --split-size KEYS
  std::vector<std::int64_t> page_size;
  std::string kv_format;         // --kv-format e4m3fn|e4m3fnuz|e5m2
  std::string kv_scale;          // --kv-scale tensor|head|channel|token
  std::string p_format;          // --p-format e4m3fn|e4m3fnuz|e5m2
  double p_prescale = 0.0;       // --p-prescale X
  std::optional<std::int64_t> acc_promote;  // --acc-promote N (N >= 1)
  std::string acc_model;         // --acc-model NAME (src/kernels/emu/mma_model_table.cpp)
  bool acc_fma = false;          // --acc-fma: the promotion as one fused multiply-add
  std::string max_memory;        // --max-memory SIZE (core/memory_budget.hpp)
  // The options that shape the case, to refuse them next to --case ID (which fixes the case:
  // a --seq given with it would otherwise be ignored without a word).
  std::vector<CLI::Option*> case_shaping;
};

// Checks a seed given on the command line before CLI11 converts it: decimal digits only and at
// most 2^64 - 1, so "-1" and "99999999999999999999999" are refused instead of wrapping.
[[nodiscard]] CLI::Validator seed_validator();
// Applies --max-memory (when given) to the process's memory budget.
void apply_max_memory(const std::string& text);

// Adds the flags; `seq_help` differs between attention (S) and drift (A..B).
void add_case_flags(CLI::App* sub, case_flags& f, const std::string& seq_help);

// Builds the case from the flags (or from --case ID), with `seq` as S. Throws input errors.
[[nodiscard]] attention_case make_case(const case_flags& f, std::int64_t seq);
[[nodiscard]] provider_options make_provider_options(const case_flags& f);
// drift --decode: the --splits and --page-size lists (validated, positive; empty when not given).
struct decode_sweep_lists {
  std::vector<std::int64_t> splits, page_sizes;
};
[[nodiscard]] decode_sweep_lists take_decode_sweep_lists(case_flags& f);
[[nodiscard]] std::vector<bound> make_bounds(const case_flags& f);
// --no-default-bound, for the commands that gate on a default bound (attention, drift).
void add_default_bound_flag(CLI::App* sub, bool& off);
// The --bound list, or when none is given (and --no-default-bound is not) the default accuracy
// gate of the case: ratio_to_naive<=2, or rel_rms<=2u for fp8 points (docs/bounds.md).
[[nodiscard]] std::vector<bound> gate_bounds(const case_flags& f, const provider_options& po);
// --rows all|N|auto; auto = `auto_rows` (0 = all).
[[nodiscard]] row_sampling make_sampling(const case_flags& f, std::int64_t auto_rows);
[[nodiscard]] std::int64_t parse_positive(const std::string& text, const std::string& flag);
// The non-empty items of a comma list ("a,,b" is {"a", "b"}).
[[nodiscard]] std::vector<std::string> split_list(const std::string& text);

// The envelope every JSON document carries: schema_version, tool, version, git revision,
// machine, seeds.
[[nodiscard]] nlohmann::json json_envelope(const std::string& command, std::uint64_t seed);
// Writes JSON to PATH or stdout ("-"); atomically for files. Throws an input error on failure.
void write_json(const std::string& path, const nlohmann::json& doc);
// Writes text to PATH atomically (temp file + rename).
void write_text_file(const std::string& path, const std::string& text);

}  // namespace numprobe::cli
