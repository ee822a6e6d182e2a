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
// Entry point of the split-KV decode (NUMPROBE_OP_DECODE): decode_on_device() launches the
// flash-decoding kernels of flash_decode.cuh (decode_split + decode_merge, the kernels
// `--backend cuda --decode` launches, instantiated here from the same source) on the given
// stream, with stream-ordered scratch for the split partials. The key range of a launch is a
// kernel parameter, so seq_lens [B] (i32, device memory) is read back to the host with a copy on
// numprobe's stream and a synchronisation of that stream (not of the device). Sequences sharing
// one K/V cache (k/v stride 0 on the first axis) whose seq_lens are all max_seq, or
// max_seq - B + 1 + i (T = B new queries, bottom-right causal), are one launch with t = B,
// exactly as the cuda backend launches a T-query decode; anything else is one launch per
// sequence (t = 1 over its seq_lens[i] keys). Splits: keys cut at multiples of
// ceil(max_seq / num_splits) (num_splits 0: 4, the cuda backend's default).
//
// Variants (NUMPROBE_FEATURE_VARIANTS): numprobe_attention_forward_variant takes a fault bit of
// the shared fault table (gpu::fault_bits, one at a time) and a tile (the tensor-core or the
// scalar path's); the checks of the compiled variants are dispatch_flash's own, so the refusals
// are the ones `--backend cuda` always gave. In numprobe's process the exception behind a
// non-zero status is kept (builtin_last_exception) and rethrown unchanged by the provider.
#include "src/kernels/gpu/builtin_kernel_table.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/flash_attention_dispatch.cuh"
#include "src/kernels/gpu/flash_decode.cuh"
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
thread_local std::exception_ptr g_last_exception;

#if NUMPROBE_GPU_HIP
constexpr bool k_hip = true;
#else
constexpr bool k_hip = false;
#endif
// Device pointers of this vendor's runtime.
constexpr int k_memory = k_hip ? NUMPROBE_MEMORY_HIP : NUMPROBE_MEMORY_CUDA;

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

void require_memory(int memory) {
  if (memory != k_memory)
    throw refused{NUMPROBE_STATUS_INVALID, k_hip
                                               ? "this plugin takes HIP device pointers (memory = hip)"
                                               : "this plugin takes CUDA device pointers (memory = cuda)"};
}

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

// ------------------------------------------------------------------ split-KV decode

template <class T>
__global__ void widened_to_dtype(const float* __restrict__ in, T* __restrict__ out, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = platform::from_float<T>(in[i]);  // exact: the merge already rounded to T
}

// Stream-ordered device scratch, freed on the stream (also on an exception).
struct scratch {
  void* ptr = nullptr;
  platform::stream_t stream;
  scratch(std::size_t bytes, platform::stream_t s) : stream(s) {
    NUMPROBE_GPU_CHECK(MallocAsync, &ptr, std::max<std::size_t>(bytes, 4), s);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  ~scratch() {
    if (ptr) (void)NUMPROBE_GPU_API(FreeAsync)(ptr, stream);
  }
  template <class U>
  U* as() const {
    return static_cast<U*>(ptr);
  }
};

// One launch: `batch` sequences of t queries each over s keys of a dense [batch*s, Hkv, D]
// cache at k/v (the layout decode_split reads), rows [batch*t, Hq] of q/o/lse.
template <class T>
void launch_decode(const T* q, const T* k, const T* v, float* o, float* lse, int batch, int t,
                   std::int64_t s, std::int64_t max_seq, int hq, int hkv, int d, int splits,
                   attention_mask mask, float scale, platform::stream_t stream) {
  const std::int64_t nrow = static_cast<std::int64_t>(batch) * t * hq;
  scratch o_part(static_cast<std::size_t>(splits) * nrow * d * 4, stream);
  scratch lse_part(static_cast<std::size_t>(splits) * nrow * 4, stream);
  decode::params<T, T> p;
  p.q = q;
  p.k = k;
  p.v = v;
  p.o_part = o_part.as<float>();
  p.lse_part = lse_part.as<float>();
  p.o = o;
  p.lse = lse;
  p.batch = batch;
  p.t = t;
  p.hq = hq;
  p.hkv = hkv;
  p.d = d;
  p.splits = splits;
  p.s = s;
  p.chunk = (max_seq + splits - 1) / splits;  // as flash_decode.cu with split_size 0
  p.mask = mask;
  p.scale_log2 = scale * decode::k_log2e_f;   // as flash_decode.cu: fp32 scale times log2 e
  decode::decode_split<T, T><<<dim3(splits, hq, batch), decode::k_decode_threads, 0, stream>>>(p);
  check_launch("decode_split");
  decode::decode_merge<T, T><<<static_cast<unsigned>(nrow), 128, 0, stream>>>(p);
  check_launch("decode_merge");
}

template <class T>
void decode_typed(const numprobe_decode_params& a, const std::vector<std::int32_t>& lens,
                  platform::stream_t stream) {
  const std::int64_t B = a.batch, S = a.max_seq;
  const int hq = static_cast<int>(a.heads), hkv = static_cast<int>(a.kv_heads), d = static_cast<int>(a.head_dim);
  const int splits = a.num_splits > 0 ? static_cast<int>(a.num_splits) : 4;
  const float scale = static_cast<float>(a.scale);
  const bool o_f32 = a.o.dtype == NUMPROBE_DTYPE_F32;
  const std::int64_t no = B * hq * d;
  // The kernel writes fp32 (O rounded to T and widened) and fp32 LSE.
  scratch o32(o_f32 ? 0 : static_cast<std::size_t>(no) * 4, stream);
  scratch lse32(a.lse.data ? 0 : static_cast<std::size_t>(B * hq) * 4, stream);
  float* o = o_f32 ? static_cast<float*>(a.o.data) : o32.as<float>();
  float* lse = a.lse.data ? static_cast<float*>(a.lse.data) : lse32.as<float>();
  const T* q = static_cast<const T*>(a.q.data);
  const T* k = static_cast<const T*>(a.k.data);
  const T* v = static_cast<const T*>(a.v.data);
  const bool shared = a.k.strides[0] == 0 && a.v.strides[0] == 0;
  bool all_full = true, causal = true;
  for (std::int64_t i = 0; i < B; ++i) {
    all_full = all_full && lens[static_cast<std::size_t>(i)] == S;
    causal = causal && lens[static_cast<std::size_t>(i)] == std::clamp<std::int64_t>(S - B + 1 + i, 0, S);
  }
  if (shared && B <= decode::k_decode_max_t && (all_full || causal)) {
    // T = B new queries over one cache: the cuda backend's launch for one batch element.
    launch_decode<T>(q, k, v, o, lse, 1, static_cast<int>(B), S, S, hq, hkv, d, splits,
                     all_full ? attention_mask::m_none : attention_mask::m_causal, scale, stream);
  } else if (!shared && a.k.strides[0] == a.v.strides[0] && a.k.strides[0] == S * hkv * d &&
             all_full) {
    // Dense [B, S, Hkv, D] cache, every sequence full: B sequences of one query.
    launch_decode<T>(q, k, v, o, lse, static_cast<int>(B), 1, S, S, hq, hkv, d, splits,
                     attention_mask::m_none, scale, stream);
  } else {
    for (std::int64_t i = 0; i < B; ++i) {
      const std::int64_t kv_off = i * a.k.strides[0];
      if (a.v.strides[0] != a.k.strides[0])
        throw refused{NUMPROBE_STATUS_UNSUPPORTED, "k and v must share their first-axis stride"};
      launch_decode<T>(q + i * hq * d, k + kv_off, v + kv_off, o + i * hq * d, lse + i * hq, 1, 1,
                       lens[static_cast<std::size_t>(i)], S, hq, hkv, d, splits, attention_mask::m_none,
                       scale, stream);
    }
  }
  if (!o_f32) {
    const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>((no + 255) / 256, 1, 65536));
    widened_to_dtype<T><<<blocks, 256, 0, stream>>>(o32.as<float>(), static_cast<T*>(a.o.data), no);
    check_launch("widened_to_dtype");
  }
}

// The device-pointer entry point of the split-KV decode.
void decode_on_device(const numprobe_decode_params& a) {
  if (a.struct_size < sizeof(numprobe_decode_params))
    throw refused{NUMPROBE_STATUS_INVALID, "numprobe_decode_params is smaller than this plugin's"};
  require_memory(a.memory);
  const std::int64_t B = a.batch, S = a.max_seq;
  if (B < 1 || S < 1 || a.heads < 1 || a.kv_heads < 1 || a.heads % a.kv_heads != 0 || a.num_splits < 0)
    throw refused{NUMPROBE_STATUS_INVALID, "needs B, max_seq, Hq, Hkv >= 1, Hkv | Hq and num_splits >= 0"};
  if (B > 65535 || a.heads > 65535 || a.num_splits > 65535)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "grid limits: B, Hq and num_splits <= 65535"};
  if (a.head_dim < 1 || a.head_dim > decode::k_decode_max_d)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "head_dim " + std::to_string(a.head_dim) + " (decode: 1..256)"};
  if (a.softcap > 0) throw refused{NUMPROBE_STATUS_UNSUPPORTED, "the decode kernel has no softcap"};
  const int dt = a.q.dtype;
  if (dt != NUMPROBE_DTYPE_BF16 && dt != NUMPROBE_DTYPE_F16)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "q/k/v must be bf16 or f16"};
  if (a.k.dtype != dt || a.v.dtype != dt || (a.o.dtype != dt && a.o.dtype != NUMPROBE_DTYPE_F32))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "q, k, v must share one dtype (bf16 or f16); o that dtype or f32"};
  if ((a.lse.data != nullptr && a.lse.dtype != NUMPROBE_DTYPE_F32) || a.seq_lens.dtype != NUMPROBE_DTYPE_I32)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "lse must be f32 and seq_lens i32"};
  const std::int64_t hd = a.kv_heads * a.head_dim;
  const auto cache_ok = [&](const numprobe_tensor& t) {
    return t.ndim == 4 && t.shape[0] == B && t.shape[1] == S && t.shape[2] == a.kv_heads &&
           t.shape[3] == a.head_dim && t.strides[3] == 1 && t.strides[2] == a.head_dim &&
           t.strides[1] == hd && t.strides[0] >= 0;
  };
  if (!dense(a.q, {B, a.heads, a.head_dim}) || !dense(a.o, {B, a.heads, a.head_dim}) ||
      !dense(a.seq_lens, {B}) || !cache_ok(a.k) || !cache_ok(a.v) ||
      (a.lse.data != nullptr && !dense(a.lse, {B, a.heads})))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED,
                  "q/o/lse/seq_lens dense; k/v [B, max_seq, Hkv, D] dense within a sequence "
                  "(first-axis stride any >= 0)"};
  NUMPROBE_GPU_CHECK(SetDevice, a.device);
  const auto stream = static_cast<platform::stream_t>(a.stream);
  std::vector<std::int32_t> lens(static_cast<std::size_t>(B));
  NUMPROBE_GPU_CHECK(MemcpyAsync, lens.data(), a.seq_lens.data, lens.size() * 4, platform::memcpy_d2h, stream);
  NUMPROBE_GPU_CHECK(StreamSynchronize, stream);
  for (std::int32_t n : lens)
    if (n < 0 || n > S) throw refused{NUMPROBE_STATUS_INVALID, "seq_lens[b] outside [0, max_seq]"};
  if (dt == NUMPROBE_DTYPE_F16) decode_typed<platform::fp16>(a, lens, stream);
  else decode_typed<platform::bf16>(a, lens, stream);
}

// The ABI boundary of every entry point: no exception crosses it; a refusal keeps its status,
// numprobe's input errors read as unsupported, anything else as failed; the message stays for
// numprobe_kernel_last_error.
template <class Params>
int guarded_call(const Params* p, void (*body)(const Params&)) noexcept {
  g_last_error.clear();
  g_last_exception = nullptr;
  if (!p) {
    g_last_error = "null parameters";
    return NUMPROBE_STATUS_INVALID;
  }
  try {
    body(*p);
    return NUMPROBE_STATUS_OK;
  } catch (const refused& r) {
    g_last_error = r.what;
    return r.status;
  } catch (const numprobe::error& e) {
    g_last_error = e.what();
    g_last_exception = std::current_exception();
    return e.code() == numprobe::exit_code::m_input ? NUMPROBE_STATUS_UNSUPPORTED : NUMPROBE_STATUS_FAILED;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    g_last_exception = std::current_exception();
    return NUMPROBE_STATUS_FAILED;
  } catch (...) {
    g_last_exception = std::current_exception();
    return NUMPROBE_STATUS_FAILED;
  }
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
                   NUMPROBE_FEATURE_VARIANTS;
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

int attention_decode(const numprobe_decode_params* p) { return guarded_call(p, decode_on_device); }

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
                                           &plugin::attention_forward_variant};
  return table;
}

std::exception_ptr builtin_last_exception() { return plugin::g_last_exception; }

}  // namespace numprobe::gpu

