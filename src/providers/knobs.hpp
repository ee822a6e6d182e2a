#pragma once
// The one reader of backend options: the `--backend KIND[:ARG]` spelling and the serving knobs
// (provider_options::knobs: --decode, --splits, --kv-format, ...). Every provider reads them
// through it, so one knob is parsed, bounded and named in errors the same way on every backend.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

namespace numprobe {

// `--backend KIND[:ARG]`: "exec:python k.py {in} {out}" is {"exec", "python k.py {in} {out}"}.
struct backend_spec {
  std::string kind;
  std::string arg;
  bool has_arg = false;  // a ':' was given (arg may still be empty)
};
[[nodiscard]] backend_spec parse_backend_spec(const std::string& backend);

// Knobs by name, without the leading "--"; errors name the flag ("--splits").
class knob_reader {
 public:
  explicit knob_reader(const std::map<std::string, std::string>& knobs) : m_knobs(knobs) {}

  [[nodiscard]] bool empty() const { return m_knobs.empty(); }
  [[nodiscard]] bool has(const std::string& name) const { return m_knobs.count(name) > 0; }
  [[nodiscard]] const std::string& text(const std::string& name) const { return m_knobs.at(name); }
  [[nodiscard]] const std::map<std::string, std::string>& all() const { return m_knobs; }
  // The first knob (in name order) not among `known`, or nullptr.
  [[nodiscard]] const std::string* first_unknown(std::initializer_list<std::string_view> known) const;

  // The whole text as an integer in [lo, hi]; input errors "expected an integer, got 'x'" and
  // "must be in [lo, hi], got v" (hi at its maximum: "must be at least lo, got v").
  [[nodiscard]] std::int64_t integer(const std::string& name, std::int64_t lo, std::int64_t hi) const;
  // The whole text as a finite number in (0, hi]; "not a number: 'x'", "must be finite and > 0".
  [[nodiscard]] double positive(const std::string& name, double hi) const;

 private:
  const std::map<std::string, std::string>& m_knobs;
};

}  // namespace numprobe
