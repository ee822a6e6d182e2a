#pragma once
// The softmax backends behind `numprobe softmax --backend` (issue 9; one registry with the
// attention and quantize backends, issue 16): ref (the double reference itself), emu (the
// emulated looped softmax kernel), cuda (the GPU looped softmax kernel), exec:CMD and
// exec-worker:CMD (a user's kernel as an external program). The softmax probe
// (probes/softmax/softmax_probe.hpp) runs any of them against the reference.
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "numprobe/reference/softmax.hpp"
#include "src/providers/provider_registry.hpp"

namespace numprobe {

class softmax_provider {
 public:
  virtual ~softmax_provider() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual std::int64_t chunk() const = 0;  // 0: not chunked
  [[nodiscard]] virtual softmax_output run(const softmax_case& c, std::span<const double> logits,
                                           std::span<const std::int64_t> rows) = 0;
  [[nodiscard]] virtual nlohmann::json metadata() const { return nlohmann::json::object(); }
};

struct softmax_provider_options {
  std::string backend = "emu";               // ref | emu | cuda | exec:CMD | exec-worker:CMD
  std::int64_t chunk = 1024;
  std::map<std::string, std::string> states;  // NAME=DTYPE (x, m, l, out, lse)
  std::vector<std::string> faults;
  bool exp2 = false;
  double exec_timeout_s = 60.0;  // exec:CMD (exec_provider_softmax.cpp)
  bool keep_temp = false;
  bool exec_worker = false;  // exec:CMD is a worker process for the whole sweep (exec-worker:CMD)
};

// Throws an input error naming the flag (unknown backend, fault, state) or a backend error
// (exit 3) for a backend that is not compiled in or has no device.
[[nodiscard]] std::unique_ptr<softmax_provider> make_softmax_provider(const softmax_provider_options& o);

using softmax_provider_factory = std::unique_ptr<softmax_provider> (*)(const softmax_provider_options& o);
// The registered softmax backends (cuda is listed in every build; without CUDA it is a backend
// error, not an unknown name).
[[nodiscard]] std::vector<backend_info> softmax_backends();

// The providers (one file each), registered in softmax_provider.cpp.
// softmax_emu_provider.cpp: the emulated looped kernel; input errors for --chunk, --inject, --state.
[[nodiscard]] std::unique_ptr<softmax_provider> make_emu_softmax_provider(const softmax_provider_options& o);
// exec_provider_softmax.cpp: o.backend is "exec:CMD" or "exec-worker:CMD" (the file convention
// of examples/exec/README.md, "softmax"). Input errors (exit 2) for options an external program
// cannot honour (faults, state dtypes, exp2) or a bad command line.
[[nodiscard]] std::unique_ptr<softmax_provider> make_exec_softmax_provider(const softmax_provider_options& o);
// cuda_softmax_provider.cpp: a backend error (exit 3) when the build has no CUDA or no device
// is visible, an input error (exit 2) for options the kernel cannot honour (state dtypes, exp2,
// unknown faults).
[[nodiscard]] std::unique_ptr<softmax_provider> make_cuda_softmax_provider(const softmax_provider_options& o);

}  // namespace numprobe
