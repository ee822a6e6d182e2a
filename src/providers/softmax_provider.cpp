// The softmax backend registry: one line per provider below, and the ref provider.
#include "src/providers/softmax_provider.hpp"

#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "src/providers/knobs.hpp"

namespace numprobe {
namespace {

class ref_softmax final : public softmax_provider {
 public:
  std::string name() const override { return "ref"; }
  std::int64_t chunk() const override { return 0; }
  softmax_output run(const softmax_case& c, std::span<const double> logits,
                     std::span<const std::int64_t> rows) override {
    return reference::softmax(c, logits, rows);
  }
};

std::unique_ptr<softmax_provider> make_ref(const softmax_provider_options& o) {
  if (!o.faults.empty()) throw_input_error("--inject", "the ref backend has no faults; use --backend emu");
  return std::make_unique<ref_softmax>();
}

const provider_registry<softmax_provider_factory>& softmax_registry() {
  static const provider_registry<softmax_provider_factory> r = [] {
    provider_registry<softmax_provider_factory> t;
    t.add("ref", &make_ref, "the double-precision reference softmax itself");
    t.add("emu", &make_emu_softmax_provider, "emulated looped softmax (chunked online max/sum; state dtypes, faults)");
    t.add("cuda", &make_cuda_softmax_provider, "built-in GPU looped softmax kernel on an NVIDIA GPU");
    t.add("exec", &make_exec_softmax_provider, "an external softmax program, one process per case (exec:CMD)");
    t.add("exec-worker", &make_exec_softmax_provider,
          "an external softmax worker process for the whole sweep (exec-worker:CMD)");
    return t;
  }();
  return r;
}

bool takes_command(const std::string& kind) { return kind == "exec" || kind == "exec-worker"; }

}  // namespace

std::unique_ptr<softmax_provider> make_softmax_provider(const softmax_provider_options& o) {
  const backend_spec spec = parse_backend_spec(o.backend);
  const bool exec = spec.has_arg && takes_command(spec.kind);
  if (o.exec_worker && !exec)
    throw_input_error("--exec-worker", fmt::format("applies to an exec:CMD backend, not '{}'", o.backend));
  // exec and exec-worker take a command after their ':'; the others take none.
  const softmax_provider_factory* make = softmax_registry().find(spec.kind);
  if (make != nullptr && spec.has_arg == takes_command(spec.kind)) return (*make)(o);
  if (o.backend == "hip")
    throw_backend_error("--backend " + o.backend, "no HIP softmax provider in this build");
  throw_input_error("--backend", fmt::format("unknown softmax backend '{}' (available: ref|emu|cuda|exec:CMD|exec-worker:CMD)", o.backend));
}

std::vector<backend_info> softmax_backends() { return softmax_registry().list(); }

}  // namespace numprobe
