#pragma once
// The result model: what probes produce and report writers read (DESIGN.md, "The result model").
// Writers never include probes; a probe's findings reach them as tagged metrics (with units and
// format hints), gate outcomes, curves, histograms, heat maps, tables and traces. No writer
// hard-codes a probe's columns.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace numprobe::result {

// How a check ended. m_error: the check could not run (bad input, device error); its
// `error_code` says which (2 input, 3 backend).
enum class status : std::uint8_t { m_pass, m_fail, m_error };

[[nodiscard]] std::string_view to_string(status s);  // "PASS", "FAIL", "ERROR"
[[nodiscard]] status parse_status(std::string_view text);

// A named measurement. `format` is a hint for writers: "sci" (3 significant digits, e.g.
// 1.23e-03), "fixed" (3 decimals), "int", "pct" (a fraction shown as a percentage).
struct metric {
  std::string name;   // tag, e.g. "rel_rms", "growth.slope", "outlier_blocks"
  double value = 0.0;
  std::string unit;   // "", "dB", "nats", "ulp", "s", "elements", "blocks"
  std::string format = "sci";
};

// One bound evaluated on one measurement.
struct gate {
  std::string bound;      // "rel_rms<=0.004"
  std::string metric;     // "rel_rms"
  double measured = 0.0;  // NaN when the metric could not be measured (never passes)
  bool held = false;
  std::string basis;      // why the threshold is what it is (shown next to it)
  std::string case_id;    // the case that produced the measurement
  bool is_default = false;  // the command's default gate (no --bound given; --no-default-bound drops it)
};

struct series {
  std::string name;
  std::vector<double> x, y;
};

struct bound_line {
  std::string label;  // "ratio_to_naive<=2"
  double y = 0.0;
};

// y against x, e.g. error against sequence length. Tile boundaries are x positions drawn as
// vertical guides; bound lines are horizontal.
struct curve {
  std::string title;
  std::string x_label, y_label;
  bool log_x = true, log_y = true;
  std::vector<series> lines;
  std::vector<double> tile_boundaries;
  std::vector<bound_line> bounds;
};

// Counts per bin; edges has counts.size() + 1 entries.
struct histogram {
  std::string title;
  std::string x_label;
  bool log_x = false;
  std::vector<double> edges;
  std::vector<double> counts;
};

// A rows x cols grid of values, row-major (e.g. flushed elements per quantization block).
struct heat_map {
  std::string title;
  std::string value_label;  // "flushed elements"
  std::string row_label, col_label;
  std::int64_t rows = 0, cols = 0;
  std::int64_t row_step = 1, col_step = 1;  // block rows/cols each cell stands for (downsampled)
  std::vector<double> values;
};

// A table of text cells; traces (bisection steps, in order) are tables too. A data table
// (`data`) holds full-precision values for machines: the CSV of a command's document is its
// data table, and the writers for people (terminal, Markdown, HTML) leave it out.
struct table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  bool data = false;
};

// A line of the view for people (the terminal, Markdown and HTML), in reading order: it sits
// before the check's `at`-th table for people (tables with data = false), or after all of them
// when `at` is their count. An empty text is a blank line.
struct note {
  std::string text;
  std::int32_t at = 0;
};

struct check_result {
  std::string name;      // the check's name (with its sweep values: "drift[dtype=f16]")
  std::string probe;     // attention, drift, quant, ...
  std::string backend;   // the provider as it names itself
  std::string case_id;   // canonical id of the (base) case
  status outcome = status::m_pass;
  int error_code = 0;    // for m_error: 2 (input) or 3 (backend)
  std::string message;   // error text for m_error; a one-line finding otherwise
  std::vector<gate> gates;
  std::vector<metric> metrics;
  std::vector<curve> curves;
  std::vector<histogram> histograms;
  std::vector<heat_map> heat_maps;
  std::vector<table> tables;
  std::vector<table> traces;
  std::vector<note> notes;
  // The view (the notes and tables) states every gate's outcome in the probe's own words (e.g.
  // audit's verdict per class), so the terminal writer does not list the gates again.
  bool view_shows_gates = false;
  nlohmann::json details = nlohmann::json::object();  // the probe's own JSON: every point
  double seconds = 0.0;

  [[nodiscard]] const metric* find_metric(std::string_view name) const;
  // 0 pass, 1 fail, error_code (2 or 3) for an error.
  [[nodiscard]] int exit_code() const;
};

struct run_result {
  // Envelope: schema_version, tool, version, git_revision, machine, devices, seeds, command.
  nlohmann::json envelope = nlohmann::json::object();
  std::string scenario;       // scenario name or path ("(built-in default)")
  std::string shard;          // "i/N" or empty
  bool incomplete = false;    // interrupted: some checks did not run
  std::int64_t checks_planned = 0;
  std::int64_t checks_resumed = 0;  // taken from the journal of an earlier run
  std::vector<check_result> checks;
  // Planned checks that never ran (interrupted), "probe:name", in run order: reports list them
  // as skipped.
  std::vector<std::string> not_run;
  int signal = 0;  // the signal that interrupted the run (SIGINT 2, SIGTERM 15); 0 if none
  double seconds = 0.0;
  // A command's document (`numprobe drift --json`, ...): one check, whose details are the
  // document's top level (docs/json-schema.md), so every field path a command has written keeps
  // its place. A run's document (false) keeps each check's details under checks[].details.
  bool command_document = false;

  // The worst outcome: 3 > 2 > 1 > 0; 128 + signal when interrupted (the process's exit code).
  [[nodiscard]] int exit_code() const;
  [[nodiscard]] std::int64_t count(status s) const;
};

// The JSON schema version (written as "schema_version") of every document numprobe writes.
// 2: one layout for every command (docs/json-schema.md), non-finite numbers as strings.
inline constexpr int k_result_schema_version = 2;

// JSON has no non-finite numbers. Every numprobe document writes them as the strings "nan",
// "inf" and "-inf" (lossless: the sign of an infinity survives), and reads them back.
[[nodiscard]] nlohmann::json json_number(double v);
// A number, or one of those strings; anything else (null included) reads as NaN.
[[nodiscard]] double read_number(const nlohmann::json& j);
// Rewrites every non-finite number in `doc` as json_number does; run on every document before
// it is written, so no encoder can leave a NaN for the JSON library to print as null.
void normalise_non_finite(nlohmann::json& doc);

[[nodiscard]] nlohmann::json to_json(const check_result& c);
[[nodiscard]] nlohmann::json to_json(const run_result& r);
// Throws numprobe::error (exit 2) naming `place` and the field on a malformed document.
[[nodiscard]] check_result check_from_json(const nlohmann::json& j, const std::string& place);
[[nodiscard]] run_result run_from_json(const nlohmann::json& j, const std::string& place);

// Builds a check's view for people in reading order: lines and tables interleaved, as a
// probe's findings read (what ran, the tables, then the verdict lines). The terminal writer
// prints them in that order; Markdown and HTML show the same lines and tables.
class view_builder {
 public:
  explicit view_builder(check_result& c) : m_c(c) {}
  void line(std::string text);
  void blank() { line(""); }
  // The new table for people; rows are added to the returned reference (valid until the next
  // add_table on this check).
  table& add_table(std::vector<std::string> columns, std::string title = "");
  table& add_table(table t);

 private:
  check_result& m_c;
};

// Number texts of the views: 4 significant digits in scientific notation (1.234e-03), 3
// decimals; non-finite values as "nan", "inf", "-inf".
[[nodiscard]] std::string sci(double v);
[[nodiscard]] std::string fixed3(double v);

// Formats a value by its hint ("sci", "fixed", "int", "pct"); NaN as "n/a".
[[nodiscard]] std::string format_value(double v, std::string_view format);

}  // namespace numprobe::result
