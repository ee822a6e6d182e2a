// The backend registry: one line per provider below.
#include <fmt/format.h>
#include <mutex>

#include "numprobe/base/error.hpp"
#include "src/providers/builtin_providers.hpp"
#include "src/providers/knobs.hpp"
#include "src/providers/provider.hpp"
#include "src/providers/provider_registry.hpp"

namespace numprobe {
namespace {

provider_registry<attention_provider_factory>& table() {
  static provider_registry<attention_provider_factory> t;
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
  table().add(name, f, description);
}

std::unique_ptr<attention_provider> make_attention_provider(const provider_options& o) {
  register_builtins();
  const std::string key = parse_backend_spec(o.backend).kind;
  const attention_provider_factory* make = table().find(key);
  if (make == nullptr) {
    if (key == "cuda" || key == "hip")
      throw_backend_error("--backend " + key,
                          fmt::format("the {} backend is not compiled into this build", key));
    throw_input_error("--backend", fmt::format("unknown backend '{}' (available: {})", o.backend,
                                               table().names()));
  }
  return (*make)(o);
}

std::vector<backend_info> attention_backends() {
  register_builtins();
  return table().list();
}

}  // namespace numprobe
