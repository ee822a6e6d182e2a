#pragma once
// One registry shape for every kind of backend (attention with its decode mode, softmax and
// quantize): a name, a factory and a one-line description, looked up by the KIND of
// `--backend KIND[:ARG]`. Registration is one line per provider.
#include <map>
#include <string>
#include <vector>

namespace numprobe {

struct backend_info {
  std::string name;
  std::string description;
};

template <class Factory>
class provider_registry {
 public:
  void add(const std::string& name, Factory f, const std::string& description) {
    m_entries[name] = entry{f, description};
  }
  // The factory registered as `kind`, or nullptr.
  [[nodiscard]] const Factory* find(const std::string& kind) const {
    const auto it = m_entries.find(kind);
    return it == m_entries.end() ? nullptr : &it->second.factory;
  }
  // "a|b|c" in name order, for "unknown backend" errors.
  [[nodiscard]] std::string names() const {
    std::string out;
    for (const auto& [n, e] : m_entries) out += (out.empty() ? "" : "|") + n;
    return out;
  }
  [[nodiscard]] std::vector<backend_info> list() const {
    std::vector<backend_info> out;
    for (const auto& [n, e] : m_entries) out.push_back({n, e.description});
    return out;
  }

 private:
  struct entry {
    Factory factory;
    std::string description;
  };
  std::map<std::string, entry> m_entries;
};

}  // namespace numprobe
