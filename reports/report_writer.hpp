#pragma once
// Report writers: one class per format, non-virtual interface (STYLE.md): the public write()
// and render() call the protected do_write(). Writers read the result model only.
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/core/result.hpp"

namespace numprobe::reports {

class report_writer {
 public:
  virtual ~report_writer() = default;
  void write(const result::run_result& r, std::ostream& out) const { do_write(r, out); }
  [[nodiscard]] std::string render(const result::run_result& r) const;

 protected:
  virtual void do_write(const result::run_result& r, std::ostream& out) const = 0;
};

// Terminal: a run is one line per check (status, name, bounds with measured values, case id);
// a command's document is its check's view for people (notes and tables in reading order),
// its gates and its time.
class terminal_writer final : public report_writer {
 public:
  // traces: a command's traces are printed too (audit prints its cases only with --trace).
  explicit terminal_writer(bool colour, bool traces = true) : m_colour(colour), m_traces(traces) {}
  // Writes to stdout.
  void print(const result::run_result& r) const;

 protected:
  void do_write(const result::run_result& r, std::ostream& out) const override;

 private:
  void write_command_body(const result::check_result& c, std::ostream& out) const;
  bool m_colour;
  bool m_traces;
};

// Columns padded to their widest cell: numbers right-aligned, the first column and a text last
// column left-aligned; one line per row, the header first (none when empty).
[[nodiscard]] std::string aligned_text(const std::vector<std::string>& header,
                                       const std::vector<std::vector<std::string>>& rows);

class json_writer final : public report_writer {
 protected:
  void do_write(const result::run_result& r, std::ostream& out) const override;
};

// JUnit XML: one <testcase> per check; a breach is a <failure>, a check that could not run an
// <error>; both carry the measured values.
class junit_writer final : public report_writer {
 protected:
  void do_write(const result::run_result& r, std::ostream& out) const override;
};

// Markdown for CI job summaries ($GITHUB_STEP_SUMMARY and the like).
class markdown_writer final : public report_writer {
 protected:
  void do_write(const result::run_result& r, std::ostream& out) const override;
};

// CSV of every curve point: check,curve,series,x,y.
class csv_writer final : public report_writer {
 protected:
  void do_write(const result::run_result& r, std::ostream& out) const override;
};

// One self-contained HTML file: inline CSS and SVG, no network.
class html_writer final : public report_writer {
 protected:
  void do_write(const result::run_result& r, std::ostream& out) const override;
};

// The file formats `--out DIR` writes, one registration line each (report_registry.cpp).
struct report_format {
  std::string_view name;       // the flag without "--": json, junit, md, html, csv
  std::string_view file_name;  // the file `--out DIR` writes
  std::string_view description;
  std::unique_ptr<report_writer> (*make)();
};

[[nodiscard]] std::span<const report_format> report_formats();

// Escaping shared by the markup writers.
[[nodiscard]] std::string xml_escape(std::string_view s);

}  // namespace numprobe::reports
