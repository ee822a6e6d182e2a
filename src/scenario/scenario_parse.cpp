// Reads scenario TOML (schema: scenarios/README.md). toml++ keeps each node's source region, so
// every message names the file, the line and the key.
#include <cstdint>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "numprobe/base/error.hpp"
#include "numprobe/io/regular_file.hpp"
#include "src/scenario/check_runner.hpp"
#include "src/scenario/scenario.hpp"

namespace numprobe::scenario {
namespace {

// Keys of a [[check]] that are not probe parameters.
const std::set<std::string> k_check_keys = {"name", "probe", "description", "bound", "basis",
                                            "bounds", "sweep"};
// Checks one scenario may hold once its sweeps are expanded. Each check runs at least one case,
// so 10^5 is days of work; anything beyond it is a typo in a sweep, not a plan.
constexpr std::size_t k_max_checks = 100'000;
const std::set<std::string> k_top_keys = {"title", "description", "defaults", "check"};

struct loc {
  const std::string& file;
  [[noreturn]] void fail(int line, const std::string& key, const std::string& what) const {
    throw_input_error(fmt::format("{}:{}: {}", file, line, key), what);
  }
};

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

// toml++ 3.3 (Debian's libtomlplusplus-dev) reaches __builtin_unreachable() in
// is_non_ascii_horizontal_whitespace for most code points of three of its lookup ranges
// (U+00A1..U+0499, U+2C5E..U+3057 but U+3000, U+FB26..U+FEFE), which the sanitizer build's
// fuzzer found: undefined behaviour on a hostile scenario file. The condition below is that
// function's own, so exactly the code points it cannot classify are refused (exit 2), before
// the parser sees them; every other character passes.
bool toml_whitespace_defect(char32_t c) {
  if (c < 0xA0 || c > 0xFEFF || c == 0xA0 || c == 0x3000 || c == 0xFEFF) return false;
  const auto index = (static_cast<std::uint64_t>(c) - 0xA0u) / 0x3FAu;
  if ((std::uint64_t{1} << index) & 0x7FFFFFFFFFFFF75Eull) return false;  // classified as not whitespace
  return index != 0x05 && index != 0x07;                                    // the switch's cases
}

void refuse_parser_defects(std::string_view text, const loc& L) {
  int line = 1;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b == '\n') ++line;
    const int len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    if (len == 1 || i + static_cast<std::size_t>(len) > text.size()) {  // ASCII, or bad UTF-8 (toml++ reports it)
      ++i;
      continue;
    }
    char32_t c = b & (0x7F >> len);
    for (int k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    if (toml_whitespace_defect(c))
      L.fail(line, "TOML", fmt::format("character U+{:04X} is not accepted: the TOML parser (toml++ 3.3) cannot "
                                       "classify it safely; use ASCII or another character",
                                       static_cast<std::uint32_t>(c)));
    i += static_cast<std::size_t>(len);
  }
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

// Converts one TOML value to a parameter of `kind`, or fails naming the key.
param convert(const toml::node& n, param_kind kind, const loc& L, const std::string& key) {
  param p;
  p.line = line_of(n);
  auto bad = [&] {
    L.fail(p.line, key, fmt::format("expected {}, got {}", to_string(kind), type_name(n)));
  };
  switch (kind) {
    case param_kind::m_int:
      if (!n.is_integer()) bad();
      p.value = n.value<std::int64_t>().value();
      break;
    case param_kind::m_float:
      if (n.is_integer()) p.value = static_cast<double>(n.value<std::int64_t>().value());
      else if (n.is_floating_point()) p.value = n.value<double>().value();
      else bad();
      break;
    case param_kind::m_bool:
      if (!n.is_boolean()) bad();
      p.value = n.value<bool>().value();
      break;
    case param_kind::m_string:
      if (!n.is_string()) bad();
      p.value = n.value<std::string>().value();
      break;
    case param_kind::m_text:
      if (n.is_string()) p.value = n.value<std::string>().value();
      else if (n.is_integer()) p.value = std::to_string(n.value<std::int64_t>().value());
      else bad();
      break;
    case param_kind::m_strings: {
      std::vector<std::string> v;
      if (n.is_string()) {
        v.push_back(n.value<std::string>().value());
      } else if (const auto* a = n.as_array()) {
        for (const auto& e : *a) {
          if (!e.is_string())
            L.fail(line_of(e), key, fmt::format("expected an array of strings, found {}", type_name(e)));
          v.push_back(e.value<std::string>().value());
        }
      } else {
        bad();
      }
      p.value = std::move(v);
      break;
    }
  }
  return p;
}

std::string require_string(const toml::table& t, const char* key, const loc& L, int table_line) {
  const auto* n = t.get(key);
  if (!n) L.fail(table_line, key, "missing (required)");
  if (!n->is_string()) L.fail(line_of(*n), key, fmt::format("expected a string, got {}", type_name(*n)));
  auto s = n->value<std::string>().value();
  if (s.empty()) L.fail(line_of(*n), key, "must not be empty");
  return s;
}

std::string param_list(const check_runner& r) {
  std::string s;
  for (const auto& p : r.params) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

std::string value_text(const param_value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) return x;
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string s;
          for (const auto& e : x) s += (s.empty() ? "" : "+") + e;
          return s;
        } else return fmt::format("{}", x);
      },
      v);
}

// A bound's metric must be one the probe reports: checked here, so the message names the
// bound's own line (not the [[check]] line), and a bound with no stated basis is warned about
// (NUMERICS.md rule 3: every bound has a basis; reports mark it too).
bound checked_bound(bound out, const check_runner& runner, const std::string& probe, const loc& L,
                    int line, const std::string& key) {
  if (!runner.known_metric(out.metric))
    L.fail(line, key, fmt::format("'{}' names no metric of probe '{}' (known: {})", out.text(), probe,
                                  runner.metric_names));
  if (out.basis.empty())
    fmt::print(stderr, "numprobe: warning: {}:{}: {}: bound '{}' has no basis (say why this number: "
                       "basis = \"...\"); reports mark it 'no basis given'\n",
               L.file, line, key, out.text());
  return out;
}

bound read_bound(const toml::node& n, const std::string& basis, const loc& L, const std::string& key) {
  if (const auto* t = n.as_table()) {
    std::string expr, b;
    for (auto&& [k, v] : *t) {
      const std::string ks(k.str());
      if (ks != "expr" && ks != "basis")
        L.fail(line_of(v), key + "." + ks, "unknown key in a bound (known: expr, basis)");
      if (!v.is_string()) L.fail(line_of(v), key + "." + ks, fmt::format("expected a string, got {}", type_name(v)));
      (ks == "expr" ? expr : b) = v.value<std::string>().value();
    }
    if (expr.empty()) L.fail(line_of(n), key, "a bound table needs expr = \"METRIC<=X\"");
    auto out = parse_bound(expr, fmt::format("{}:{}: {}", L.file, line_of(n), key));
    out.basis = b;
    return out;
  }
  if (!n.is_string())
    L.fail(line_of(n), key, fmt::format("expected a string \"METRIC<=X\" or {{ expr, basis }}, got {}", type_name(n)));
  auto out = parse_bound(n.value<std::string>().value(), fmt::format("{}:{}: {}", L.file, line_of(n), key));
  out.basis = basis;
  return out;
}

}  // namespace

std::string_view to_string(param_kind k) {
  switch (k) {
    case param_kind::m_int: return "an integer";
    case param_kind::m_float: return "a number";
    case param_kind::m_bool: return "a boolean";
    case param_kind::m_string: return "a string";
    case param_kind::m_strings: return "a string or an array of strings";
    case param_kind::m_text: return "a string or an integer";
  }
  return "?";
}

scenario parse_scenario(std::string_view text, const std::string& source_name) {
  const loc L{source_name};
  toml::table doc;
  refuse_parser_defects(text, L);
  try {
    doc = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    L.fail(static_cast<int>(e.source().begin.line), "TOML", std::string(e.description()));
  }
  scenario sc;
  sc.source = source_name;
  for (auto&& [k, v] : doc) {
    const std::string ks(k.str());
    if (!k_top_keys.count(ks))
      L.fail(line_of(v), ks, "unknown top-level key (known: title, description, [defaults], [[check]])");
    if ((ks == "title" || ks == "description") && !v.is_string())
      L.fail(line_of(v), ks, fmt::format("expected a string, got {}", type_name(v)));
  }
  sc.title = doc["title"].value_or(std::string{});
  sc.description = doc["description"].value_or(std::string{});

  // [defaults]: parameters applied to every check whose probe takes them.
  std::map<std::string, const toml::node*> defaults;
  if (const auto* d = doc.get("defaults")) {
    const auto* t = d->as_table();
    if (!t) L.fail(line_of(*d), "defaults", "expected a table [defaults]");
    for (auto&& [k, v] : *t) {
      const std::string ks(k.str());
      bool known = false;
      for (const auto& r : check_runners()) known |= r.find_param(ks) != nullptr;
      if (!known) L.fail(line_of(v), "defaults." + ks, "unknown parameter (no probe takes it)");
      defaults[ks] = &v;
    }
  }

  const auto* checks_node = doc.get("check");
  if (!checks_node) L.fail(1, "check", "no [[check]] entries");
  const auto* checks = checks_node->as_array();
  if (!checks || !checks->is_array_of_tables())
    L.fail(line_of(*checks_node), "check", "expected [[check]] tables");
  std::set<std::string> names;
  for (const auto& cn : *checks) {
    const auto& ct = *cn.as_table();
    const int cline = line_of(ct);
    check_spec base;
    base.file = source_name;
    base.line = cline;
    base.name = require_string(ct, "name", L, cline);
    base.probe = require_string(ct, "probe", L, cline);
    const std::string ctx = fmt::format("check '{}'", base.name);
    const auto* runner = find_runner(base.probe);
    if (!runner) {
      std::string known;
      for (const auto& r : check_runners()) known += (known.empty() ? "" : ", ") + r.probe;
      L.fail(line_of(*ct.get("probe")), ctx + ": probe",
             fmt::format("unknown probe '{}' (available: {})", base.probe, known));
    }
    for (const auto& [k, v] : defaults)
      if (const auto* ps = runner->find_param(k)) base.params[k] = convert(*v, ps->kind, L, "defaults." + k);
    std::string basis;
    if (const auto* b = ct.get("basis")) {
      if (!b->is_string()) L.fail(line_of(*b), ctx + ": basis", "expected a string");
      basis = b->value<std::string>().value();
      if (!ct.get("bound")) L.fail(line_of(*b), ctx + ": basis", "basis goes with bound = \"...\" (or use bounds = [{ expr, basis }])");
    }
    std::vector<std::pair<std::string, std::vector<std::pair<param, std::string>>>> sweeps;
    for (auto&& [k, v] : ct) {
      const std::string ks(k.str());
      const std::string key = ctx + ": " + ks;
      if (ks == "name" || ks == "probe" || ks == "basis") continue;
      if (ks == "description") {
        if (!v.is_string()) L.fail(line_of(v), key, "expected a string");
        base.description = v.value<std::string>().value();
      } else if (ks == "bound") {
        base.bounds.push_back(checked_bound(read_bound(v, basis, L, key), *runner, base.probe, L, line_of(v), key));
      } else if (ks == "bounds") {
        const auto* a = v.as_array();
        if (!a) L.fail(line_of(v), key, fmt::format("expected an array of bounds, got {}", type_name(v)));
        for (const auto& e : *a)
          base.bounds.push_back(checked_bound(read_bound(e, "", L, key), *runner, base.probe, L, line_of(e), key));
      } else if (ks == "sweep") {
        const auto* t = v.as_table();
        if (!t) L.fail(line_of(v), key, "expected a table: sweep = { PARAM = [values...] }");
        for (auto&& [sk, sv] : *t) {
          const std::string sks(sk.str());
          const std::string skey = key + "." + sks;
          const auto* ps = runner->find_param(sks);
          if (!ps) L.fail(line_of(sv), skey, fmt::format("'{}' takes no parameter '{}' (known: {})", base.probe, sks, param_list(*runner)));
          const auto* a = sv.as_array();
          if (!a || a->empty()) L.fail(line_of(sv), skey, "expected a non-empty array of values");
          std::vector<std::pair<param, std::string>> values;
          for (const auto& e : *a) {
            auto p = convert(e, ps->kind, L, skey);
            values.emplace_back(p, value_text(p.value));
          }
          sweeps.emplace_back(sks, std::move(values));
        }
      } else {
        const auto* ps = runner->find_param(ks);
        if (!ps)
          L.fail(line_of(v), key, fmt::format("unknown key for probe '{}' (known: {}, and name, probe, description, bound, basis, bounds, sweep)",
                                              base.probe, param_list(*runner)));
        base.params[ks] = convert(v, ps->kind, L, key);
      }
    }

    // Cap the product before building it: a sweep of 2e9 checks would otherwise be expanded
    // in memory and die with no file:line.
    {
      double product = 1.0;
      for (const auto& [key, values] : sweeps) {
        product *= static_cast<double>(values.size());
        if (product + static_cast<double>(sc.checks.size()) > static_cast<double>(k_max_checks))
          L.fail(line_of(*ct.get("sweep")), ctx + ": sweep",
                 fmt::format("expands to {:.0f} checks or more (at '{}'), beyond the limit of {} checks "
                             "per scenario; split it into several checks or scenarios",
                             product, key, k_max_checks));
      }
    }
    // Expand the sweep: the cartesian product, in file order, last axis fastest.
    std::vector<check_spec> expanded{base};
    for (const auto& [key, values] : sweeps) {
      std::vector<check_spec> next;
      for (const auto& c : expanded)
        for (const auto& [p, text] : values) {
          check_spec e = c;
          e.params[key] = p;
          const bool first = e.name.find('[') == std::string::npos;
          if (first) e.name += "[" + key + "=" + text + "]";
          else e.name.insert(e.name.size() - 1, "," + key + "=" + text);
          next.push_back(std::move(e));
        }
      expanded = std::move(next);
    }
    for (auto& e : expanded) {
      if (!names.insert(e.name).second)
        L.fail(cline, ctx + ": name", fmt::format("duplicate check name '{}'", e.name));
      sc.checks.push_back(std::move(e));
    }
  }
  return sc;
}

scenario load_scenario_file(const std::string& path) {
  // A scenario is a few kilobytes; the cap keeps `run /dev/zero`-like mistakes from reading
  // without end (io::read_text_file refuses non-regular files first).
  constexpr std::size_t k_max_scenario_bytes = 16u << 20;
  return parse_scenario(io::read_text_file(path, k_max_scenario_bytes, "scenario file"), path);
}

}  // namespace numprobe::scenario
