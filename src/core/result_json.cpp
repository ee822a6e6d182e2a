// JSON form of the result model. It round-trips: run_from_json(to_json(r)) gives r back (NaN and
// infinities travel as "nan", "inf", "-inf"), so `numprobe merge` and `--resume` rebuild results
// from JSON alone.
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result.hpp"

namespace numprobe::result {

using json = nlohmann::json;

json json_number(double v) {
  if (std::isfinite(v)) return v;
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

double read_number(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void normalise_non_finite(json& doc) {
  if (doc.is_number_float()) {
    if (!std::isfinite(doc.get<double>())) doc = json_number(doc.get<double>());
  } else if (doc.is_structured()) {
    for (auto& v : doc) normalise_non_finite(v);
  }
}

namespace {

json nums(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(json_number(x));
  return a;
}

std::vector<double> read_nums(const json& j) {
  std::vector<double> v;
  for (const auto& x : j) v.push_back(read_number(x));
  return v;
}

json table_json(const table& t) {
  json j = {{"title", t.title}, {"columns", t.columns}, {"rows", t.rows}};
  if (t.data) j["data"] = true;
  return j;
}

table read_table(const json& j) {
  table t;
  t.title = j.value("title", "");
  t.columns = j.value("columns", std::vector<std::string>{});
  t.rows = j.value("rows", std::vector<std::vector<std::string>>{});
  t.data = j.value("data", false);
  return t;
}

template <class F>
auto guarded(const std::string& place, F f) {
  try {
    return f();
  } catch (const json::exception& e) {
    throw_input_error(place, fmt::format("not a numprobe result document: {}", e.what()));
  }
}

}  // namespace

json to_json(const check_result& c) {
  json j;
  j["name"] = c.name;
  j["probe"] = c.probe;
  j["backend"] = c.backend;
  j["case"] = c.case_id;
  j["status"] = std::string(to_string(c.outcome));
  if (c.outcome == status::m_error) j["error_code"] = c.error_code;
  j["message"] = c.message;
  j["seconds"] = c.seconds;
  j["gates"] = json::array();
  for (const auto& g : c.gates) {
    j["gates"].push_back({{"bound", g.bound}, {"metric", g.metric}, {"measured", json_number(g.measured)},
                          {"held", g.held}, {"basis", g.basis}, {"case", g.case_id}});
    if (g.is_default) j["gates"].back()["default"] = true;
  }
  j["metrics"] = json::array();
  for (const auto& m : c.metrics)
    j["metrics"].push_back({{"name", m.name}, {"value", json_number(m.value)}, {"unit", m.unit},
                            {"format", m.format}});
  j["curves"] = json::array();
  for (const auto& cv : c.curves) {
    json lines = json::array();
    for (const auto& s : cv.lines) lines.push_back({{"name", s.name}, {"x", nums(s.x)}, {"y", nums(s.y)}});
    json bl = json::array();
    for (const auto& b : cv.bounds) bl.push_back({{"label", b.label}, {"y", json_number(b.y)}});
    j["curves"].push_back({{"title", cv.title}, {"x_label", cv.x_label}, {"y_label", cv.y_label},
                           {"log_x", cv.log_x}, {"log_y", cv.log_y}, {"lines", lines},
                           {"tile_boundaries", nums(cv.tile_boundaries)}, {"bounds", bl}});
  }
  j["histograms"] = json::array();
  for (const auto& h : c.histograms)
    j["histograms"].push_back({{"title", h.title}, {"x_label", h.x_label}, {"log_x", h.log_x},
                               {"edges", nums(h.edges)}, {"counts", nums(h.counts)}});
  j["heat_maps"] = json::array();
  for (const auto& h : c.heat_maps)
    j["heat_maps"].push_back({{"title", h.title}, {"value_label", h.value_label},
                              {"row_label", h.row_label}, {"col_label", h.col_label},
                              {"rows", h.rows}, {"cols", h.cols}, {"row_step", h.row_step},
                              {"col_step", h.col_step}, {"values", nums(h.values)}});
  j["tables"] = json::array();
  for (const auto& t : c.tables) j["tables"].push_back(table_json(t));
  j["traces"] = json::array();
  for (const auto& t : c.traces) j["traces"].push_back(table_json(t));
  j["notes"] = json::array();
  for (const auto& n : c.notes) j["notes"].push_back({{"text", n.text}, {"at", n.at}});
  if (c.view_shows_gates) j["view_shows_gates"] = true;
  j["details"] = c.details;
  return j;
}

json to_json(const run_result& r) {
  json j = r.envelope;
  j["schema_version"] = k_result_schema_version;
  if (r.command_document && r.checks.size() == 1) {
    // A command's document: the envelope, the one check (without its details) and the details
    // as the top level, so every field path the command has written keeps its place. The
    // details win a clash with anything but the document's identity.
    const check_result& c = r.checks.front();
    j["command_document"] = true;
    j["exit_code"] = r.exit_code();
    if (r.signal > 0) {  // interrupted: the document holds what was measured before the signal
      j["incomplete"] = true;
      j["signal"] = r.signal;
    }
    j["checks"] = json::array({to_json(c)});
    j["checks"][0].erase("details");
    for (auto it = c.details.begin(); it != c.details.end(); ++it)
      if (it.key() != "schema_version" && it.key() != "tool" && it.key() != "checks" &&
          it.key() != "command_document")
        j[it.key()] = it.value();
    normalise_non_finite(j);
    return j;
  }
  j["scenario"] = r.scenario;
  j["shard"] = r.shard;
  j["incomplete"] = r.incomplete;
  j["checks_planned"] = r.checks_planned;
  j["checks_resumed"] = r.checks_resumed;
  j["not_run"] = r.not_run;
  if (r.signal > 0) j["signal"] = r.signal;
  j["seconds"] = r.seconds;
  j["summary"] = {{"pass", r.count(status::m_pass)}, {"fail", r.count(status::m_fail)},
                  {"error", r.count(status::m_error)}, {"exit_code", r.exit_code()}};
  j["checks"] = json::array();
  for (const auto& c : r.checks) j["checks"].push_back(to_json(c));
  normalise_non_finite(j);
  return j;
}

check_result check_from_json(const json& j, const std::string& place) {
  return guarded(place, [&] {
    check_result c;
    c.name = j.at("name").get<std::string>();
    c.probe = j.value("probe", "");
    c.backend = j.value("backend", "");
    c.case_id = j.value("case", "");
    c.outcome = parse_status(j.at("status").get<std::string>());
    c.error_code = j.value("error_code", 0);
    c.message = j.value("message", "");
    c.seconds = j.value("seconds", 0.0);
    for (const auto& g : j.value("gates", json::array()))
      c.gates.push_back({g.value("bound", ""), g.value("metric", ""), read_number(g.value("measured", json())),
                         g.value("held", false), g.value("basis", ""), g.value("case", ""),
                         g.value("default", false)});
    for (const auto& m : j.value("metrics", json::array()))
      c.metrics.push_back({m.value("name", ""), read_number(m.value("value", json())), m.value("unit", ""),
                           m.value("format", "sci")});
    for (const auto& cj : j.value("curves", json::array())) {
      curve cv;
      cv.title = cj.value("title", "");
      cv.x_label = cj.value("x_label", "");
      cv.y_label = cj.value("y_label", "");
      cv.log_x = cj.value("log_x", true);
      cv.log_y = cj.value("log_y", true);
      for (const auto& s : cj.value("lines", json::array()))
        cv.lines.push_back({s.value("name", ""), read_nums(s.value("x", json::array())),
                            read_nums(s.value("y", json::array()))});
      cv.tile_boundaries = read_nums(cj.value("tile_boundaries", json::array()));
      for (const auto& b : cj.value("bounds", json::array()))
        cv.bounds.push_back({b.value("label", ""), read_number(b.value("y", json()))});
      c.curves.push_back(std::move(cv));
    }
    for (const auto& h : j.value("histograms", json::array()))
      c.histograms.push_back({h.value("title", ""), h.value("x_label", ""), h.value("log_x", false),
                              read_nums(h.value("edges", json::array())),
                              read_nums(h.value("counts", json::array()))});
    for (const auto& h : j.value("heat_maps", json::array())) {
      heat_map m;
      m.title = h.value("title", "");
      m.value_label = h.value("value_label", "");
      m.row_label = h.value("row_label", "");
      m.col_label = h.value("col_label", "");
      m.rows = h.value("rows", std::int64_t{0});
      m.cols = h.value("cols", std::int64_t{0});
      m.row_step = h.value("row_step", std::int64_t{1});
      m.col_step = h.value("col_step", std::int64_t{1});
      m.values = read_nums(h.value("values", json::array()));
      if (static_cast<std::int64_t>(m.values.size()) != m.rows * m.cols)
        throw_input_error(place, fmt::format("heat map '{}': {} values for {}x{} cells", m.title,
                                             m.values.size(), m.rows, m.cols));
      c.heat_maps.push_back(std::move(m));
    }
    for (const auto& t : j.value("tables", json::array())) c.tables.push_back(read_table(t));
    for (const auto& t : j.value("traces", json::array())) c.traces.push_back(read_table(t));
    for (const auto& n : j.value("notes", json::array()))
      c.notes.push_back({n.at("text").get<std::string>(), n.value("at", std::int32_t{0})});
    c.view_shows_gates = j.value("view_shows_gates", false);
    c.details = j.value("details", json::object());
    return c;
  });
}

run_result run_from_json(const json& j, const std::string& place) {
  return guarded(place, [&] {
    if (!j.is_object() || j.value("tool", "") != "numprobe" || !j.contains("checks"))
      throw_input_error(place, "not a numprobe run result (no tool/checks fields)");
    const int v = j.value("schema_version", 0);
    if (v != k_result_schema_version)
      throw_input_error(place, fmt::format("schema_version {} (this numprobe reads {})", v,
                                           k_result_schema_version));
    run_result r;
    r.envelope = j;
    for (const char* k : {"scenario", "shard", "incomplete", "checks_planned", "checks_resumed",
                          "not_run", "signal", "seconds", "summary", "checks"})
      r.envelope.erase(k);
    r.scenario = j.value("scenario", "");
    r.shard = j.value("shard", "");
    r.incomplete = j.value("incomplete", false);
    r.checks_planned = j.value("checks_planned", std::int64_t{0});
    r.checks_resumed = j.value("checks_resumed", std::int64_t{0});
    if (const auto nr = j.find("not_run"); nr != j.end() && nr->is_array())
      for (const auto& n : *nr)
        if (n.is_string()) r.not_run.push_back(n.get<std::string>());
    r.signal = j.value("signal", 0);
    r.seconds = j.value("seconds", 0.0);
    std::size_t i = 0;
    for (const auto& c : j.at("checks")) r.checks.push_back(check_from_json(c, fmt::format("{}: checks[{}]", place, i++)));
    return r;
  });
}

}  // namespace numprobe::result
