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

namespace {

// Every provider behind this wrapper: a ragged batch reaches only a kernel that takes one (its
// own takes_ragged(), or provider_options::ragged for a user's kernel that says it reads the
// lengths); any other gets an unsupported_case naming the case, never padding read as keys.
class ragged_guard final : public attention_provider {
 public:
  ragged_guard(std::unique_ptr<attention_provider> inner, bool declared)
      : m_inner(std::move(inner)), m_takes(declared || m_inner->takes_ragged()) {}
  std::string name() const override { return m_inner->name(); }
  tile_shape tiles() const override { return m_inner->tiles(); }
  bool computes_row_subsets() const override { return m_inner->computes_row_subsets(); }
  bool takes_ragged() const override { return m_takes; }
  nlohmann::json metadata() const override { return m_inner->metadata(); }
  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    if (in.c().ragged() && !m_takes)
      throw_unsupported(m_inner->name(), "a ragged batch (per-sequence lengths): this backend takes one length "
                                         "per call (exec and Python kernels that read seq_lens: --ragged)");
    return m_inner->run(in, rows);
  }

 private:
  std::unique_ptr<attention_provider> m_inner;
  bool m_takes;
};

}  // namespace

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
  return std::make_unique<ragged_guard>((*make)(o), o.ragged);
}

std::vector<backend_info> attention_backends() {
  register_builtins();
  return table().list();
}

}  // namespace numprobe
