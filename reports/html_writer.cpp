// One self-contained HTML file: inline CSS, inline SVG, and a few lines of inline script that
// check the plots rendered (they count the drawn marks). Nothing is fetched from the network.
#include <algorithm>
#include <fmt/format.h>

#include "reports/gate_text.hpp"
#include "reports/report_writer.hpp"
#include "reports/svg_plot.hpp"
#include "reports/view_order.hpp"

namespace numprobe::reports {
namespace {

constexpr const char* k_style = R"(
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f5f5f5}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f6f6f6;padding:1px 3px;border-radius:3px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:600;font-size:12px}
.PASS{background:#2ca02c}.FAIL{background:#d62728}.ERROR{background:#9467bd}
.banner{padding:8px 12px;border-radius:6px;background:#fff3cd;border:1px solid #e0c36a;margin:12px 0}
.meta td:first-child{color:#666}.meta .kv-rows td{color:#222}.kv,.kv-rows{margin:0}svg.plot{display:block;margin:6px 0 14px;max-width:100%;height:auto}
svg .tick{font-size:11px;fill:#555}svg .label{font-size:12px;fill:#333}svg .legend{font-size:11px;fill:#333}
svg .boundlabel{font-size:11px;fill:#d62728}.msg{color:#444;margin:4px 0}.held-no{color:#d62728;font-weight:600}
pre.notes{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;background:#f8f8f8;padding:6px 10px;border-radius:4px;overflow-x:auto}
)";

// Counts the marks each plot drew (with a non-empty box) and records it on the page, so a
// headless browser's DOM dump shows whether the plots rendered.
constexpr const char* k_self_check = R"(
(function(){var plots=document.querySelectorAll('svg.plot'),marks=0,empty=0;
plots.forEach(function(s){var n=0;s.querySelectorAll('.pt,.bar,.cell').forEach(function(m){var b=m.getBBox();if(b.width>0||b.height>0)n++;});
s.setAttribute('data-rendered-marks',n);marks+=n;if(n===0)empty++;});
document.body.setAttribute('data-plots',plots.length);document.body.setAttribute('data-marks',marks);
document.body.setAttribute('data-empty-plots',empty);document.body.setAttribute('data-rendered','ok');})();
)";

std::string esc(std::string_view s) { return xml_escape(s); }

void write_table(std::ostream& out, const result::table& t) {
  if (!t.title.empty()) out << "<h3>" << esc(t.title) << "</h3>\n";
  out << "<table><tr>";
  for (const auto& c : t.columns) out << "<th>" << esc(c) << "</th>";
  out << "</tr>\n";
  for (const auto& row : t.rows) {
    out << "<tr>";
    for (const auto& c : row) out << "<td>" << esc(c) << "</td>";
    out << "</tr>\n";
  }
  out << "</table>\n";
}

// Envelope metadata (machine, devices, seeds) as tables a reader scans, not JSON text: an
// object is one key/value row per leaf, nested objects flattened to dotted keys; an array of
// objects is a table with one row per element; an array of scalars is a comma list.
void flatten(const nlohmann::json& j, const std::string& prefix,
             std::vector<std::pair<std::string, const nlohmann::json*>>& leaves) {
  for (const auto& [k, v] : j.items()) {
    const std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object() && !v.empty()) flatten(v, key, leaves);
    else leaves.emplace_back(key, &v);
  }
}

void write_value(std::ostream& out, const nlohmann::json& j);

void write_object_array(std::ostream& out, const nlohmann::json& a) {
  std::vector<std::vector<std::pair<std::string, const nlohmann::json*>>> rows(a.size());
  std::vector<std::string> columns;  // union of the flattened keys, in order of first appearance
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_object()) flatten(a[i], "", rows[i]);
    else rows[i].emplace_back("value", &a[i]);
    for (const auto& [k, v] : rows[i])
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
  }
  out << "<table class=\"kv-rows\"><tr>";
  for (const auto& c : columns) out << "<th>" << esc(c) << "</th>";
  out << "</tr>\n";
  for (const auto& row : rows) {
    out << "<tr>";
    for (const auto& c : columns) {
      out << "<td>";
      const auto it = std::find_if(row.begin(), row.end(), [&c](const auto& kv) { return kv.first == c; });
      if (it != row.end()) write_value(out, *it->second);
      out << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>";
}

void write_value(std::ostream& out, const nlohmann::json& j) {
  if (j.is_string()) {
    out << esc(j.get<std::string>());
  } else if (j.is_object()) {
    std::vector<std::pair<std::string, const nlohmann::json*>> leaves;
    flatten(j, "", leaves);
    out << "<table class=\"kv\">";
    for (const auto& [k, v] : leaves) {
      out << "<tr><td>" << esc(k) << "</td><td>";
      write_value(out, *v);
      out << "</td></tr>";
    }
    out << "</table>";
  } else if (j.is_array() && std::any_of(j.begin(), j.end(), [](const auto& e) { return e.is_structured(); })) {
    write_object_array(out, j);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (i) out << ", ";
      write_value(out, j[i]);
    }
  } else if (!j.empty()) {  // number, boolean (null and {} print nothing)
    out << esc(j.dump());
  }
}

}  // namespace

void html_writer::do_write(const result::run_result& r, std::ostream& out) const {
  const auto fail = r.count(result::status::m_fail), err = r.count(result::status::m_error);
  const std::string verdict = err ? "ERROR" : fail ? "FAIL" : "PASS";
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
      << "<title>numprobe: " << esc(r.scenario) << "</title>\n<style>" << k_style << "</style></head>\n<body>\n";
  out << "<h1>numprobe: " << esc(r.scenario) << " <span class=\"badge " << verdict << "\">" << verdict << "</span></h1>\n";
  out << fmt::format("<p>{} checks: {} passed, {} failed, {} errors, {:.1f} s{}{}</p>\n", r.checks.size(),
                     r.count(result::status::m_pass), fail, err, r.seconds,
                     r.shard.empty() ? "" : ", shard " + esc(r.shard),
                     r.checks_resumed ? fmt::format(", {} resumed from the journal", r.checks_resumed) : "");
  if (r.incomplete)
    out << fmt::format("<div class=\"banner\" id=\"incomplete\"><b>Incomplete run:</b> {} of {} checks ran "
                       "(interrupted). Rerun with <code>--resume</code> to finish.</div>\n",
                       r.checks.size(), r.checks_planned);
  out << "<table class=\"meta\">\n";
  for (const char* k : {"version", "git_revision", "machine", "devices", "seeds", "command"})
    if (r.envelope.contains(k)) {
      const auto& v = r.envelope[k];
      out << "<tr><td>" << k << "</td><td>" << (v.is_structured() ? "" : "<code>");
      write_value(out, v);
      out << (v.is_structured() ? "" : "</code>") << "</td></tr>\n";
    }
  out << "</table>\n";

  out << "<table><tr><th>status</th><th>check</th><th>bounds (measured)</th><th>backend</th><th>case</th></tr>\n";
  for (std::size_t i = 0; i < r.checks.size(); ++i) {
    const auto& c = r.checks[i];
    std::string gates = c.outcome == result::status::m_error ? esc(c.message) : "";
    for (const auto& g : c.gates)
      gates += (gates.empty() ? "" : "<br>") + std::string(g.held ? "" : "<span class=\"held-no\">") +
               esc(detail::gate_text(c, g)) + (g.held ? "" : "</span>");
    out << fmt::format("<tr><td><span class=\"badge {0}\">{0}</span></td><td><a href=\"#check-{1}\">{2}</a></td>"
                       "<td>{3}</td><td>{4}</td><td><code>{5}</code></td></tr>\n",
                       result::to_string(c.outcome), i, esc(c.name), gates, esc(c.backend), esc(c.case_id));
  }
  out << "</table>\n";

  for (std::size_t i = 0; i < r.checks.size(); ++i) {
    const auto& c = r.checks[i];
    out << fmt::format("<section id=\"check-{}\"><h2>{} <span class=\"badge {}\">{}</span></h2>\n", i, esc(c.name),
                       result::to_string(c.outcome), result::to_string(c.outcome));
    out << fmt::format("<p class=\"msg\">probe <b>{}</b> on <b>{}</b>, case <code>{}</code>, {:.2f} s</p>\n",
                       esc(c.probe), esc(c.backend), esc(c.case_id), c.seconds);
    if (!c.message.empty()) out << "<p class=\"msg\">" << esc(c.message) << "</p>\n";
    if (!c.gates.empty()) {
      out << "<table><tr><th>bound</th><th>measured</th><th>held</th><th>basis</th><th>case</th></tr>\n";
      for (const auto& g : c.gates)
        out << fmt::format("<tr><td><code>{}</code></td><td>{}</td><td{}>{}</td><td>{}</td><td><code>{}</code></td></tr>\n",
                           esc(g.bound), esc(detail::measured_text(c, g)), g.held ? "" : " class=\"held-no\"",
                           g.held ? "yes" : "NO", esc(detail::basis_text(g)), esc(g.case_id));
      out << "</table>\n";
    }
    if (!c.metrics.empty()) {
      out << "<table><tr><th>metric</th><th>value</th><th>unit</th></tr>\n";
      for (const auto& m : c.metrics)
        out << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(m.name),
                           esc(result::format_value(m.value, m.format)), esc(m.unit));
      out << "</table>\n";
    }
    for (const auto& cv : c.curves) out << "<h3>" << esc(cv.title) << "</h3>\n" << detail::svg_curve(cv);
    for (const auto& h : c.histograms) out << "<h3>" << esc(h.title) << "</h3>\n" << detail::svg_histogram(h);
    for (const auto& h : c.heat_maps) out << "<h3>" << esc(h.title) << "</h3>\n" << detail::svg_heat_map(h);
    detail::for_each_in_reading_order(
        c,
        [&out](const std::vector<std::string>& lines) {
          out << "<pre class=\"notes\">";
          for (const auto& l : lines) out << esc(l) << '\n';
          out << "</pre>\n";
        },
        [&out](const result::table& t) { write_table(out, t); });
    for (const auto& t : c.traces) write_table(out, t);
    out << "</section>\n";
  }
  out << "<script>" << k_self_check << "</script>\n</body></html>\n";
}

}  // namespace numprobe::reports
