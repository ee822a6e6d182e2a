// `--backend ref`: the double reference itself as the implementation under test. Its error
// against the reference is zero by construction; it exists to check probes and inputs end to end
// and as the baseline for external kernels.
#include "numprobe/base/error.hpp"
#include "numprobe/reference/attention.hpp"
#include "src/providers/builtin_providers.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

class ref_provider final : public attention_provider {
 public:
  explicit ref_provider(const provider_options& o) {
    if (!o.faults.empty()) throw_input_error("--inject", "the ref backend has no faults");
    if (!o.states.empty()) throw_input_error("--state", "the ref backend has no state dtypes");
  }
  std::string name() const override { return "ref"; }
  tile_shape tiles() const override { return {}; }
  bool takes_ragged() const override { return true; }
  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    const auto q = in.q_rows(rows);
    return reference::attention(in.c(), q, rows, in.k(), in.v());
  }
  nlohmann::json metadata() const override {
    return {{"arithmetic", "double, compensated sums"}, {"exp", "libm/Eigen double exp"}};
  }
};

std::unique_ptr<attention_provider> make_ref(const provider_options& o) {
  return std::make_unique<ref_provider>(o);
}

}  // namespace

void register_ref_provider() {
  register_attention_provider("ref", &make_ref, "double-precision reference (error 0 by construction)");
}

}  // namespace numprobe
