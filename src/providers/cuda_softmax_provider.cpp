// `numprobe softmax --backend cuda`: the GPU looped softmax kernel (src/kernels/gpu/
// looped_softmax.cuh) behind the softmax_provider interface. Compiled in every build; without
// CUDA its factory is a backend error (exit 3).
#include "src/providers/softmax_provider.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#if NUMPROBE_HAVE_CUDA
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/gpu_faults.hpp"
#endif

namespace numprobe {
#if NUMPROBE_HAVE_CUDA
namespace {

class cuda_softmax final : public softmax_provider {
 public:
  explicit cuda_softmax(const softmax_provider_options& o) : m_chunk(o.chunk) {
    if (o.chunk < 1 || o.chunk > (std::int64_t{1} << 24))
      throw_input_error("--chunk", fmt::format("must be in [1, 2^24], got {}", o.chunk));
    if (!o.states.empty())
      throw_input_error("--state", "the cuda softmax has fixed states (x in the input dtype; m, l, "
                                   "out, lse in fp32); use --inject rowsum-bf16 or --backend emu");
    if (o.exp2) throw_input_error("--exp2", "the cuda softmax uses accurate expf; --exp2 is for --backend emu");
    const gpu_fault_choice fault = parse_gpu_faults(o.faults, "cuda", gpu_kernel::m_softmax);
    m_faults = fault.bit;
    m_fault_name = fault.name;
    const gpu::backend_api& api = gpu::cuda_api();
    if (api.device_count() == 0)
      throw_backend_error("--backend cuda", fmt::format("no CUDA device ({})", api.no_device_reason()));
    m_device_name = api.device_info(0).name;
  }
  std::string name() const override {
    std::string s = fmt::format("cuda-softmax[chunk={}", m_chunk);
    if (m_faults != 0) s += ",inject=" + m_fault_name;
    return s + "]";
  }
  std::int64_t chunk() const override { return m_chunk; }
  softmax_output run(const softmax_case& c, std::span<const double> logits,
                     std::span<const std::int64_t> rows) override {
    gpu::softmax_request r;
    r.rows = static_cast<std::int64_t>(rows.size());
    r.vocab = c.vocab;
    r.chunk = m_chunk;
    switch (c.dtype) {
      case formats::format_id::m_bf16: r.dtype = gpu::softmax_dtype::m_bf16; break;
      case formats::format_id::m_f16: r.dtype = gpu::softmax_dtype::m_f16; break;
      case formats::format_id::m_f32: r.dtype = gpu::softmax_dtype::m_f32; break;
      default:
        throw_input_error("--dtype", fmt::format("the cuda softmax reads bf16, f16 or f32 logits, not {}",
                                                 formats::name(c.dtype)));
    }
    r.temperature = static_cast<float>(c.temperature);
    r.softcap = static_cast<float>(c.softcap);
    r.faults = m_faults;
    // Rounded logits are exact in the case dtype, hence in float (masked entries -inf).
    const std::vector<float> x(logits.begin(), logits.end());
    std::vector<std::int64_t> targets;
    for (auto row : rows) targets.push_back(softmax_target(c, row));
    r.logits = x.data();
    r.targets = targets.data();
    const gpu::softmax_device_result d = gpu::cuda_softmax_api().softmax(r);
    m_last_ms = d.kernel_ms;
    softmax_output out;
    out.rows.assign(rows.begin(), rows.end());
    out.vocab = c.vocab;
    out.p.assign(d.p.begin(), d.p.end());
    out.logp.assign(d.logp.begin(), d.logp.end());
    out.lse.assign(d.lse.begin(), d.lse.end());
    out.ce.assign(d.ce.begin(), d.ce.end());
    return out;
  }
  nlohmann::json metadata() const override {
    std::vector<std::string> faults;
    if (m_faults != 0) faults.push_back(m_fault_name);
    return {{"backend", "cuda"},
            {"device", m_device_name},
            {"kernel", "looped_softmax (one block per row, chunked online max/sum)"},
            {"chunk", m_chunk},
            {"states", {{"x", "input"}, {"m", "f32"}, {"l", m_faults == gpu::k_fault_rowsum_bf16 ? "bf16" : "f32"},
                        {"out", "f32"}, {"lse", "f32"}}},
            {"exp", "expf/logf (accurate)"},
            {"faults", faults},
            {"last_kernel_ms", m_last_ms}};
  }

 private:
  std::int64_t m_chunk;
  std::uint32_t m_faults = 0;
  std::string m_fault_name;
  std::string m_device_name;
  double m_last_ms = 0.0;
};

}  // namespace
#endif

std::unique_ptr<softmax_provider> make_cuda_softmax_provider(const softmax_provider_options& o) {
#if NUMPROBE_HAVE_CUDA
  return std::make_unique<cuda_softmax>(o);
#else
  (void)o;
  throw_backend_error("--backend cuda", "the cuda backend is not compiled into this build");
#endif
}

}  // namespace numprobe
