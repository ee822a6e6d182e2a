#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "src/scenario/scenario.hpp"

namespace numprobe::scenario {

std::int64_t check_spec::get_int(const std::string& key, std::int64_t fallback) const {
  const auto it = params.find(key);
  return it == params.end() ? fallback : std::get<std::int64_t>(it->second.value);
}

double check_spec::get_float(const std::string& key, double fallback) const {
  const auto it = params.find(key);
  return it == params.end() ? fallback : std::get<double>(it->second.value);
}

bool check_spec::get_bool(const std::string& key, bool fallback) const {
  const auto it = params.find(key);
  return it == params.end() ? fallback : std::get<bool>(it->second.value);
}

std::string check_spec::get_string(const std::string& key, const std::string& fallback) const {
  const auto it = params.find(key);
  return it == params.end() ? fallback : std::get<std::string>(it->second.value);
}

std::vector<std::string> check_spec::get_strings(const std::string& key) const {
  const auto it = params.find(key);
  return it == params.end() ? std::vector<std::string>{} : std::get<std::vector<std::string>>(it->second.value);
}

std::string check_spec::place(const std::string& key) const {
  const auto it = params.find(key);
  const int l = it != params.end() && it->second.line > 0 ? it->second.line : line;
  return fmt::format("{}:{}: check '{}': {}", file, l, name, key);
}

std::string scenario::fingerprint() const {
  // FNV-1a over a canonical text of the expanded checks: stable across builds and machines.
  std::string text;
  for (const auto& c : checks) {
    text += c.name + "|" + c.probe + "|";
    for (const auto& [k, p] : c.params)
      text += k + "=" + std::visit([](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string s;
          for (const auto& e : v) s += e + "+";
          return s;
        } else if constexpr (std::is_same_v<T, std::string>) return v;
        else return fmt::format("{}", v);
      }, p.value) + ";";
    for (const auto& b : c.bounds) text += b.text() + ";";
    text += "\n";
  }
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace numprobe::scenario
