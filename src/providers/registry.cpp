// The backend registry: one line per provider below.
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "numprobe/core/error.hpp"
#include "src/providers/builtin_providers.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

struct entry {
  attention_provider_factory factory;
  std::string description;
};

std::map<std::string, entry>& table() {
  static std::map<std::string, entry> t;
  return t;
}

void register_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_ref_provider();
    register_emu_provider();
    register_exec_provider();
    register_plugin_provider();
#if NUMPROBE_HAVE_CUDA
    register_cuda_provider();
#endif
#if NUMPROBE_HAVE_HIP
    register_hip_provider();
#endif
  });
}

}  // namespace

void register_attention_provider(const std::string& name, attention_provider_factory f,
                                 const std::string& description) {
  table()[name] = entry{f, description};
}

std::unique_ptr<attention_provider> make_attention_provider(const provider_options& o) {
  register_builtins();
  const auto colon = o.backend.find(':');
  const std::string key = o.backend.substr(0, colon);
  const auto it = table().find(key);
  if (it == table().end()) {
    if (key == "cuda" || key == "hip")
      throw_backend_error("--backend " + key,
                          fmt::format("the {} backend is not compiled into this build", key));
    std::string known;
    for (const auto& [n, e] : table()) known += (known.empty() ? "" : "|") + n;
    throw_input_error("--backend", fmt::format("unknown backend '{}' (available: {})", o.backend, known));
  }
  return it->second.factory(o);
}

std::vector<backend_info> attention_backends() {
  register_builtins();
  std::vector<backend_info> out;
  for (const auto& [n, e] : table()) out.push_back({n, e.description});
  return out;
}

}  // namespace numprobe
