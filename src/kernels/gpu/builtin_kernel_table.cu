// The built-in GPU kernels behind the plugin ABI (include/numprobe/kernel_abi.h), as one
// numprobe_kernel_table: linked into numprobe, where `--backend cuda` / `hip` registers it with
// the plugin library (src/providers/plugin_library.hpp, no dlopen), and exported by
// numprobe_cuda_plugin (plugin_entry.cu) as the C functions of a plugin .so.
//
// Entry point on device pointers: forward_on_device() builds flash_params from the ABI tensors
// and calls dispatch_flash (the same instantiations gpu_backend.cu launches) on the given
// stream. Inputs and output are in the case dtype (bf16 or fp16); LSE fp32. No synchronisation
// and no persistent allocation: a missing LSE buffer is replaced by stream-ordered scratch.
//
// Entries of the split-KV decode (NUMPROBE_OP_DECODE, NUMPROBE_FEATURE_DECODE_VARIANTS):
// builtin_decode_entry.cu. What the entries share: builtin_entry_support.cuh.
//
// Variants (NUMPROBE_FEATURE_VARIANTS): numprobe_attention_forward_variant takes a fault bit of
// the shared fault table (gpu::fault_bits, one at a time) and a tile (the tensor-core or the
// scalar path's); the checks of the compiled variants are dispatch_flash's own, so the refusals
// are the ones `--backend cuda` always gave. In numprobe's process the exception behind a
// non-zero status is kept (builtin_last_exception) and rethrown unchanged by the provider.
#include "src/kernels/gpu/builtin_kernel_table.hpp"

#include <cstdint>
#include <exception>
#include <string>

#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/builtin_entry_support.cuh"
#include "src/kernels/gpu/flash_attention_dispatch.cuh"
#include "src/kernels/gpu/gpu_api.hpp"

namespace numprobe::gpu {

extern template void dispatch_flash<platform::bf16>(const flash_params<platform::bf16>&, int,
                                                    std::uint32_t, attention_path,
                                                    platform::stream_t);
extern template void dispatch_flash<platform::fp16>(const flash_params<platform::fp16>&, int,
                                                    std::uint32_t, attention_path,
                                                    platform::stream_t);

namespace plugin {

thread_local std::string g_last_error;
thread_local std::exception_ptr g_last_exception;

namespace {

template <class T>
void forward_typed(const numprobe_attention_params& a, std::uint32_t faults, attention_path path,
                   platform::stream_t stream) {
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
  const int tq = path == attention_path::m_mma && platform::has_mma_sync ? k_mma_tile_q : k_scalar_tile_q;
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
    dispatch_flash<T>(p, static_cast<int>(a.head_dim), faults, path, stream);
  } catch (...) {
    if (scratch) (void)NUMPROBE_GPU_API(FreeAsync)(scratch, stream);
    throw;
  }
  if (scratch) NUMPROBE_GPU_CHECK(FreeAsync, scratch, stream);
}

constexpr attention_path k_default_path = platform::has_mma_sync ? attention_path::m_mma : attention_path::m_scalar;

// What every forward entry checks; the compiled head dims are dispatch_flash's to check.
void check_forward(const numprobe_attention_params& a) {
  if (a.struct_size < sizeof(numprobe_attention_params))
    throw refused{NUMPROBE_STATUS_INVALID, "numprobe_attention_params is smaller than this plugin's"};
  require_memory(a.memory);
  const std::int64_t bt = a.batch * a.queries, bs = a.batch * a.seq;
  if (a.batch < 1 || a.queries < 1 || a.seq < 1 || a.heads < 1 || a.kv_heads < 1 ||
      a.heads % a.kv_heads != 0)
    throw refused{NUMPROBE_STATUS_INVALID, "needs B, T, S, Hq, Hkv >= 1 and Hkv | Hq"};
  if (a.batch > 65535 || a.heads > 65535)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "grid limits: B and Hq <= 65535"};
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
}

void launch_forward(const numprobe_attention_params& a, std::uint32_t faults, attention_path path) {
  NUMPROBE_GPU_CHECK(SetDevice, a.device);
  const auto stream = static_cast<platform::stream_t>(a.stream);
  if (a.q.dtype == NUMPROBE_DTYPE_F16) forward_typed<platform::fp16>(a, faults, path, stream);
  else forward_typed<platform::bf16>(a, faults, path, stream);
}

// The device-pointer entry point of the forward kernel (the production variant).
void forward_on_device(const numprobe_attention_params& a) {
  check_forward(a);
  if (a.head_dim != 64 && a.head_dim != 128)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "head_dim " + std::to_string(a.head_dim) + " (compiled: 64, 128)"};
  launch_forward(a, k_fault_none, k_default_path);
}

struct variant_call {
  const numprobe_attention_params* params;
  const numprobe_kernel_variant* variant;
};

// numprobe_attention_forward_variant: a fault variant (gpu::fault_bits) on the path whose tile
// is asked for. Unknown bits, two faults, a fault without a variant at this head dim: the
// refusals of dispatch_flash (input errors, status unsupported).
void forward_variant_on_device(const variant_call& c) {
  if (!c.params || !c.variant) throw refused{NUMPROBE_STATUS_INVALID, "null parameters"};
  const numprobe_kernel_variant& v = *c.variant;
  if (v.struct_size < sizeof(numprobe_kernel_variant))
    throw refused{NUMPROBE_STATUS_INVALID, "numprobe_kernel_variant is smaller than this plugin's"};
  check_forward(*c.params);
  attention_path path = k_default_path;
  if (v.tile_q != 0 || v.tile_k != 0) {
    if (platform::has_mma_sync && v.tile_q == k_mma_tile_q && v.tile_k == k_mma_tile_k) path = attention_path::m_mma;
    else if (v.tile_q == k_scalar_tile_q && v.tile_k == k_scalar_tile_k) path = attention_path::m_scalar;
    else
      throw refused{NUMPROBE_STATUS_UNSUPPORTED, "no kernel compiled for tile " + std::to_string(v.tile_q) + "x" +
                                                     std::to_string(v.tile_k)};
  }
  launch_forward(*c.params, v.variant, path);
}

// ------------------------------------------------------------------ the table

std::uint32_t abi_version() { return NUMPROBE_KERNEL_ABI_VERSION; }

int capabilities(numprobe_capabilities* caps) {
  if (!caps || caps->struct_size < sizeof(numprobe_capabilities)) return NUMPROBE_STATUS_INVALID;
  caps->abi_version = NUMPROBE_KERNEL_ABI_VERSION;
  caps->name = k_hip ? "numprobe-hip-flash" : "numprobe-cuda-flash";
  caps->description = k_hip
                          ? "numprobe's built-in HIP flash-attention forward and split-KV decode (the "
                            "--backend hip kernels) on numprobe's device buffers and stream"
                          : "numprobe's built-in CUDA flash-attention forward and split-KV decode (the "
                            "--backend cuda kernels) on numprobe's device buffers and stream";
  caps->ops = NUMPROBE_OP_ATTENTION_FORWARD | NUMPROBE_OP_DECODE;
  caps->features = NUMPROBE_FEATURE_SOFTCAP | NUMPROBE_FEATURE_LSE | NUMPROBE_FEATURE_BATCH |
                   NUMPROBE_FEATURE_VARIANTS | NUMPROBE_FEATURE_DECODE_VARIANTS;
  caps->input_dtypes = (1u << NUMPROBE_DTYPE_BF16) | (1u << NUMPROBE_DTYPE_F16);
  caps->output_dtypes = (1u << NUMPROBE_DTYPE_BF16) | (1u << NUMPROBE_DTYPE_F16);
  caps->masks = (1u << NUMPROBE_MASK_NONE) | (1u << NUMPROBE_MASK_CAUSAL) |
                (1u << NUMPROBE_MASK_CAUSAL_TOP_LEFT) | (1u << NUMPROBE_MASK_WINDOW);
  caps->memory = k_memory;
  caps->tile_q = platform::has_mma_sync ? k_mma_tile_q : k_scalar_tile_q;
  caps->tile_k = platform::has_mma_sync ? k_mma_tile_k : k_scalar_tile_k;
  caps->max_head_dim = 128;
  return NUMPROBE_STATUS_OK;
}

int attention_forward(const numprobe_attention_params* p) { return guarded_call(p, forward_on_device); }

int attention_forward_variant(const numprobe_attention_params* p, const numprobe_kernel_variant* v) {
  const variant_call c{p, v};
  return guarded_call(&c, forward_variant_on_device);
}

const char* last_error() { return g_last_error.c_str(); }

}  // namespace
}  // namespace plugin

#if NUMPROBE_GPU_HIP
const numprobe_kernel_table& hip_builtin_kernel_table() {
#else
const numprobe_kernel_table& cuda_builtin_kernel_table() {
#endif
  static const numprobe_kernel_table table{sizeof(numprobe_kernel_table),
                                           &plugin::abi_version,
                                           &plugin::capabilities,
                                           &plugin::attention_forward,
                                           &plugin::attention_decode,
                                           nullptr,
                                           &plugin::last_error,
                                           &plugin::attention_forward_variant,
                                           &plugin::attention_decode_variant};
  return table;
}

std::exception_ptr builtin_last_exception() { return plugin::g_last_exception; }

}  // namespace numprobe::gpu

