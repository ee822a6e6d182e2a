// The check-runner registry: one line per probe.
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {

const std::vector<check_runner>& check_runners() {
  static const std::vector<check_runner> runners = {
      attention_runner(),
      drift_runner(),
      quant_runner(),
      bisect_runner(),
      softmax_runner(),
      kl_runner(),
      scan_runner(),
      kvcache_runner(),
      invariance_runner(),
  };
  return runners;
}

const check_runner* find_runner(std::string_view probe) {
  for (const auto& r : check_runners())
    if (r.probe == probe) return &r;
  return nullptr;
}

const param_spec* check_runner::find_param(std::string_view n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

}  // namespace numprobe::scenario
