#pragma once
// A scenario: checks with their probe parameters and bounds, read from TOML (scenarios/README.md
// documents the schema). Sweeps are expanded when the file is read, so every check here is one
// runnable unit with a unique name.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "numprobe/core/bound.hpp"

namespace numprobe::scenario {

// Parameter types a probe declares (the TOML types they accept).
enum class param_kind : std::uint8_t {
  m_int,      // integer
  m_float,    // float or integer
  m_bool,     // boolean
  m_string,   // string
  m_strings,  // string or array of strings (repeatable flags such as inject, state)
  m_text,     // string or integer, kept as text (seq = 1024 or seq = "128..8192")
};

[[nodiscard]] std::string_view to_string(param_kind k);

using param_value = std::variant<std::int64_t, double, bool, std::string, std::vector<std::string>>;

struct param {
  param_value value;
  int line = 0;  // where it was set (0: built in)
};

struct check_spec {
  std::string name;    // unique in the scenario; sweeps append "[key=value,...]"
  std::string probe;
  std::string description;
  std::string file;    // for messages
  int line = 0;        // the [[check]] header
  std::map<std::string, param> params;  // [defaults] merged in, sweep values applied
  std::vector<bound> bounds;

  [[nodiscard]] bool has(const std::string& key) const { return params.count(key) != 0; }
  // Typed access with a default; the loader has already checked the types.
  [[nodiscard]] std::int64_t get_int(const std::string& key, std::int64_t fallback) const;
  [[nodiscard]] double get_float(const std::string& key, double fallback) const;
  [[nodiscard]] bool get_bool(const std::string& key, bool fallback) const;
  [[nodiscard]] std::string get_string(const std::string& key, const std::string& fallback) const;
  [[nodiscard]] std::vector<std::string> get_strings(const std::string& key) const;
  // "file:line: check 'name': key" for error messages about a parameter.
  [[nodiscard]] std::string place(const std::string& key) const;
};

struct scenario {
  std::string source;  // path, or "(built-in default)"
  std::string title;
  std::string description;
  std::vector<check_spec> checks;
  // A stable fingerprint of the expanded checks (journal matching on --resume).
  [[nodiscard]] std::string fingerprint() const;
};

// Parse a scenario. Every problem (TOML syntax, unknown key, wrong type, bad bound, unknown
// probe or metric, duplicate name) is an input error (exit 2) naming the file, line and key.
[[nodiscard]] scenario parse_scenario(std::string_view text, const std::string& source_name);
[[nodiscard]] scenario load_scenario_file(const std::string& path);

// The built-in default scenario (scenarios/default.toml, embedded so `numprobe run` works from
// any directory).
[[nodiscard]] std::string_view default_scenario_text();

}  // namespace numprobe::scenario
