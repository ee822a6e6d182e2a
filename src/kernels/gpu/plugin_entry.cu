// numprobe_cuda_plugin: the built-in flash-attention forward kernel exported through the plugin
// ABI (include/numprobe/kernel_abi.h), so that `--backend plugin:libnumprobe_cuda_plugin.so`
// runs exactly the kernel `--backend cuda` runs, on device pointers and numprobe's stream.
//
// Entry point on device pointers: forward_on_device() builds flash_params from the ABI tensors
// and calls dispatch_flash (the same instantiations gpu_backend.cu launches) on the given
// stream. Inputs and output are in the case dtype (bf16 or fp16); LSE fp32. No synchronisation
// and no persistent allocation: a missing LSE buffer is replaced by stream-ordered scratch.
#include <cstdint>
#include <exception>
#include <string>

#include "numprobe/core/error.hpp"
#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/flash_attention_dispatch.cuh"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/gpu_check.cuh"

namespace numprobe::gpu {

extern template void dispatch_flash<platform::bf16>(const flash_params<platform::bf16>&, int,
                                                    std::uint32_t, attention_path,
                                                    platform::stream_t);
extern template void dispatch_flash<platform::fp16>(const flash_params<platform::fp16>&, int,
                                                    std::uint32_t, attention_path,
                                                    platform::stream_t);

namespace plugin {
namespace {

thread_local std::string g_last_error;

struct refused {
  int status;
  std::string what;
};

bool dense(const numprobe_tensor& t, std::initializer_list<std::int64_t> shape) {
  if (t.ndim != static_cast<int>(shape.size())) return false;
  int i = 0;
  for (auto s : shape)
    if (t.shape[i++] != s) return false;
  std::int64_t stride = 1;
  for (int k = t.ndim - 1; k >= 0; --k) {
    if (t.shape[k] > 1 && t.strides[k] != stride) return false;
    stride *= t.shape[k];
  }
  return true;
}

attention_mask to_mask(int m) {
  switch (m) {
    case NUMPROBE_MASK_NONE: return attention_mask::m_none;
    case NUMPROBE_MASK_CAUSAL: return attention_mask::m_causal;
    case NUMPROBE_MASK_CAUSAL_TOP_LEFT: return attention_mask::m_causal_top_left;
    case NUMPROBE_MASK_WINDOW: return attention_mask::m_window;
    default: throw refused{NUMPROBE_STATUS_UNSUPPORTED, "unknown mask " + std::to_string(m)};
  }
}

template <class T>
void forward_typed(const numprobe_attention_params& a, platform::stream_t stream) {
  flash_params<T> p{};
  p.q = static_cast<const T*>(a.q.data);
  p.k = static_cast<const T*>(a.k.data);
  p.v = static_cast<const T*>(a.v.data);
  p.o = static_cast<T*>(a.o.data);
  p.n_q = a.queries;
  p.n_k = a.seq;
  p.hq = static_cast<int>(a.heads);
  p.hkv = static_cast<int>(a.kv_heads);
  p.group = static_cast<int>(a.heads / a.kv_heads);
  // As gpu_backend.cu: scale rounded to fp32, then times log2(e) in fp32.
  p.scale = static_cast<float>(a.scale);
  p.scale_log2 = p.scale * k_log2e;
  p.softcap = static_cast<float>(a.softcap);
  p.mask = to_mask(a.mask);
  p.window = a.window;
  p.batch = static_cast<int>(a.batch);
  const attention_path path = platform::has_mma_sync ? attention_path::m_mma : attention_path::m_scalar;
  const int tq = path == attention_path::m_mma ? k_mma_tile_q : k_scalar_tile_q;
  p.n_qtiles = static_cast<int>((a.queries + tq - 1) / tq);
  void* scratch = nullptr;
  if (a.lse.data == nullptr) {
    NUMPROBE_GPU_CHECK(MallocAsync, &scratch, static_cast<std::size_t>(a.batch * a.queries * a.heads) * 4,
                       stream);
    p.lse = static_cast<float*>(scratch);
  } else {
    p.lse = static_cast<float*>(a.lse.data);
  }
  try {
    dispatch_flash<T>(p, static_cast<int>(a.head_dim), k_fault_none, path, stream);
  } catch (...) {
    if (scratch) (void)NUMPROBE_GPU_API(FreeAsync)(scratch, stream);
    throw;
  }
  if (scratch) NUMPROBE_GPU_CHECK(FreeAsync, scratch, stream);
}

// The device-pointer entry point of the forward kernel.
void forward_on_device(const numprobe_attention_params& a) {
  if (a.struct_size < sizeof(numprobe_attention_params))
    throw refused{NUMPROBE_STATUS_INVALID, "numprobe_attention_params is smaller than this plugin's"};
  if (a.memory != NUMPROBE_MEMORY_CUDA)
    throw refused{NUMPROBE_STATUS_INVALID, "this plugin takes CUDA device pointers (memory = cuda)"};
  const std::int64_t bt = a.batch * a.queries, bs = a.batch * a.seq;
  if (a.batch < 1 || a.queries < 1 || a.seq < 1 || a.heads < 1 || a.kv_heads < 1 ||
      a.heads % a.kv_heads != 0)
    throw refused{NUMPROBE_STATUS_INVALID, "needs B, T, S, Hq, Hkv >= 1 and Hkv | Hq"};
  if (a.batch > 65535 || a.heads > 65535)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "grid limits: B and Hq <= 65535"};
  if (a.head_dim != 64 && a.head_dim != 128)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "head_dim " + std::to_string(a.head_dim) + " (compiled: 64, 128)"};
  const int dt = a.q.dtype;
  if (dt != NUMPROBE_DTYPE_BF16 && dt != NUMPROBE_DTYPE_F16)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "q/k/v must be bf16 or f16"};
  if (a.k.dtype != dt || a.v.dtype != dt || a.o.dtype != dt)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "q, k, v and o must share one dtype (bf16 or f16)"};
  if (a.lse.data != nullptr && a.lse.dtype != NUMPROBE_DTYPE_F32)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "lse must be f32"};
  if (!dense(a.q, {bt, a.heads, a.head_dim}) || !dense(a.o, {bt, a.heads, a.head_dim}) ||
      !dense(a.k, {bs, a.kv_heads, a.head_dim}) || !dense(a.v, {bs, a.kv_heads, a.head_dim}) ||
      (a.lse.data != nullptr && !dense(a.lse, {bt, a.heads})))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "tensors must be dense C-order with the documented shapes"};
  if (a.mask == NUMPROBE_MASK_WINDOW && a.window < 1)
    throw refused{NUMPROBE_STATUS_INVALID, "a sliding window needs W >= 1"};
  NUMPROBE_GPU_CHECK(SetDevice, a.device);
  const auto stream = static_cast<platform::stream_t>(a.stream);
  if (dt == NUMPROBE_DTYPE_F16) forward_typed<platform::fp16>(a, stream);
  else forward_typed<platform::bf16>(a, stream);
}

}  // namespace
}  // namespace plugin
}  // namespace numprobe::gpu

extern "C" {

NUMPROBE_PLUGIN_EXPORT uint32_t numprobe_kernel_abi_version(void) { return NUMPROBE_KERNEL_ABI_VERSION; }

NUMPROBE_PLUGIN_EXPORT int numprobe_kernel_capabilities(numprobe_capabilities* caps) {
  if (!caps || caps->struct_size < sizeof(numprobe_capabilities)) return NUMPROBE_STATUS_INVALID;
  using namespace numprobe::gpu;
  caps->abi_version = NUMPROBE_KERNEL_ABI_VERSION;
  caps->name = "numprobe-cuda-flash";
  caps->description = "numprobe's built-in CUDA flash-attention forward (the --backend cuda kernel) "
                      "on numprobe's device buffers and stream";
  caps->ops = NUMPROBE_OP_ATTENTION_FORWARD;
  caps->features = NUMPROBE_FEATURE_SOFTCAP | NUMPROBE_FEATURE_LSE | NUMPROBE_FEATURE_BATCH;
  caps->input_dtypes = (1u << NUMPROBE_DTYPE_BF16) | (1u << NUMPROBE_DTYPE_F16);
  caps->output_dtypes = (1u << NUMPROBE_DTYPE_BF16) | (1u << NUMPROBE_DTYPE_F16);
  caps->masks = (1u << NUMPROBE_MASK_NONE) | (1u << NUMPROBE_MASK_CAUSAL) |
                (1u << NUMPROBE_MASK_CAUSAL_TOP_LEFT) | (1u << NUMPROBE_MASK_WINDOW);
  caps->memory = NUMPROBE_MEMORY_CUDA;
  caps->tile_q = platform::has_mma_sync ? k_mma_tile_q : k_scalar_tile_q;
  caps->tile_k = platform::has_mma_sync ? k_mma_tile_k : k_scalar_tile_k;
  caps->max_head_dim = 128;
  return NUMPROBE_STATUS_OK;
}

NUMPROBE_PLUGIN_EXPORT int numprobe_attention_forward(const numprobe_attention_params* p) {
  using namespace numprobe::gpu::plugin;
  g_last_error.clear();
  if (!p) {
    g_last_error = "null parameters";
    return NUMPROBE_STATUS_INVALID;
  }
  try {
    forward_on_device(*p);
    return NUMPROBE_STATUS_OK;
  } catch (const refused& r) {
    g_last_error = r.what;
    return r.status;
  } catch (const numprobe::error& e) {
    g_last_error = e.what();
    return e.code() == numprobe::exit_code::m_input ? NUMPROBE_STATUS_UNSUPPORTED
                                                    : NUMPROBE_STATUS_FAILED;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return NUMPROBE_STATUS_FAILED;
  }
}

NUMPROBE_PLUGIN_EXPORT const char* numprobe_kernel_last_error(void) {
  return numprobe::gpu::plugin::g_last_error.c_str();
}

}  // extern "C"
