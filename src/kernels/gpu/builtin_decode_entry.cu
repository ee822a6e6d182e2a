// The split-KV decode entries of the built-in kernel table (builtin_kernel_table.cu): the
// flash-decoding kernels of flash_decode.cuh (decode_split + decode_merge, instantiated here
// from the source flash_decode.cu's direct launch compiles) on device pointers and numprobe's
// stream, with stream-ordered scratch for the split partials (poisoned, as the direct launch's
// workspace). No synchronisation of the device and no persistent allocation.
//
// numprobe_attention_decode (NUMPROBE_OP_DECODE): one query per sequence. The key range of a
// launch is a kernel parameter, so seq_lens [B] (i32, device memory) is read back to the host
// with a copy on numprobe's stream and a synchronisation of that stream (not of the device).
// Sequences sharing one K/V cache (k/v stride 0 on the first axis) whose seq_lens are all
// max_seq, or max_seq - B + 1 + i (T = B new queries, bottom-right causal), are one launch with
// t = B, exactly as the cuda backend launches a T-query decode; anything else is one launch per
// sequence (t = 1 over its seq_lens[i] keys). Splits: keys cut at multiples of
// ceil(max_seq / num_splits) (num_splits 0: 4, the cuda backend's default).
//
// numprobe_attention_decode_variant (NUMPROBE_FEATURE_DECODE_VARIANTS): T queries per sequence
// with the variant's mask, split size, KV storage (e4m3fn codes with per-tensor or per-KV-head
// fp32 scales), FP8 P, accumulator promotion and decode fault bits (gpu::k_decode_faults, the
// run-time flags of the fault-free kernel, any combination). Every sequence full (seq_lens NULL,
// or all max_seq) on a dense [B, max_seq, Hkv, D] cache is the one launch `--backend cuda
// --decode` makes, the split LSE written straight into split_lse; anything else is one launch
// per sequence (no split_lse). What the kernels do not have is refused, never replaced.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/builtin_entry_support.cuh"
#include "src/kernels/gpu/flash_decode.cuh"
#include "src/kernels/gpu/gpu_api.hpp"

namespace numprobe::gpu::plugin {
namespace {

template <class T>
__global__ void widened_to_dtype(const float* __restrict__ in, T* __restrict__ out, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = platform::from_float<T>(in[i]);  // exact: the merge already rounded to T
}

// decode_split + decode_merge over p. The split partials are `workspace` (the caller's, already
// poisoned) or stream-ordered scratch; p.lse_part is scratch too when null.
template <class T, class KV>
void launch_split_merge(decode::params<T, KV> p, float* workspace, platform::stream_t stream) {
  const std::int64_t nrow = static_cast<std::int64_t>(p.batch) * p.t * p.hq;
  const std::size_t o_bytes = static_cast<std::size_t>(p.splits) * nrow * p.d * 4;
  scratch o_part(workspace ? 0 : o_bytes, stream);
  scratch lse_part(p.lse_part ? 0 : static_cast<std::size_t>(p.splits) * nrow * 4, stream);
  // 0xFF bytes: NaN, so a partial the split kernel failed to write poisons the merge.
  if (!workspace) NUMPROBE_GPU_CHECK(MemsetAsync, o_part.ptr, 0xFF, o_bytes, stream);
  p.o_part = workspace ? workspace : o_part.as<float>();
  if (!p.lse_part) p.lse_part = lse_part.as<float>();
  decode::decode_split<T, KV><<<dim3(p.splits, p.hq, p.batch), decode::k_decode_threads, 0, stream>>>(p);
  check_launch("decode_split");
  decode::decode_merge<T, KV><<<static_cast<unsigned>(nrow), 128, 0, stream>>>(p);
  check_launch("decode_merge");
}

// The kernel writes fp32 O (rounded to T, widened) and fp32 LSE: scratch when the caller's
// buffers are not that, narrowed into them at the end.
template <class T>
struct decode_outputs {
  decode_outputs(const numprobe_tensor& o_t, const numprobe_tensor& lse_t, std::int64_t rows,
                 std::int64_t hq, std::int64_t d, platform::stream_t s)
      : o_tensor(o_t), n(rows * hq * d), o_f32(o_t.dtype == NUMPROBE_DTYPE_F32),
        o32(o_f32 ? 0 : static_cast<std::size_t>(n) * 4, s),
        lse32(lse_t.data ? 0 : static_cast<std::size_t>(rows * hq) * 4, s), stream(s) {
    o = o_f32 ? static_cast<float*>(o_t.data) : o32.as<float>();
    lse = lse_t.data ? static_cast<float*>(lse_t.data) : lse32.as<float>();
  }
  void finish() const {
    if (o_f32) return;
    const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>((n + 255) / 256, 1, 65536));
    widened_to_dtype<T><<<blocks, 256, 0, stream>>>(o32.as<float>(), static_cast<T*>(o_tensor.data), n);
    check_launch("widened_to_dtype");
  }
  const numprobe_tensor& o_tensor;
  std::int64_t n;
  bool o_f32;
  scratch o32, lse32;
  platform::stream_t stream;
  float* o = nullptr;
  float* lse = nullptr;
};

// seq_lens [B] read back on the stream (the key range is a launch parameter).
std::vector<std::int32_t> read_lens(const numprobe_decode_params& a, platform::stream_t stream) {
  std::vector<std::int32_t> lens(static_cast<std::size_t>(a.batch));
  NUMPROBE_GPU_CHECK(MemcpyAsync, lens.data(), a.seq_lens.data, lens.size() * 4, platform::memcpy_d2h, stream);
  NUMPROBE_GPU_CHECK(StreamSynchronize, stream);
  for (std::int32_t n : lens)
    if (n < 0 || n > a.max_seq) throw refused{NUMPROBE_STATUS_INVALID, "seq_lens[b] outside [0, max_seq]"};
  return lens;
}

// ------------------------------------------------------------------ numprobe_attention_decode

// One launch: `batch` sequences of t queries each over s keys of a dense [batch*s, Hkv, D]
// cache at k/v (the layout decode_split reads), rows [batch*t, Hq] of q/o/lse.
template <class T>
void launch_decode(const T* q, const T* k, const T* v, float* o, float* lse, int batch, int t,
                   std::int64_t s, std::int64_t max_seq, int hq, int hkv, int d, int splits,
                   attention_mask mask, float scale, platform::stream_t stream) {
  decode::params<T, T> p;
  p.q = q;
  p.k = k;
  p.v = v;
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
  launch_split_merge(p, nullptr, stream);
}

template <class T>
void decode_typed(const numprobe_decode_params& a, const std::vector<std::int32_t>& lens,
                  platform::stream_t stream) {
  const std::int64_t B = a.batch, S = a.max_seq;
  const int hq = static_cast<int>(a.heads), hkv = static_cast<int>(a.kv_heads), d = static_cast<int>(a.head_dim);
  const int splits = a.num_splits > 0 ? static_cast<int>(a.num_splits) : 4;
  const float scale = static_cast<float>(a.scale);
  const decode_outputs<T> out(a.o, a.lse, B, hq, d, stream);
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
    launch_decode<T>(q, k, v, out.o, out.lse, 1, static_cast<int>(B), S, S, hq, hkv, d, splits,
                     all_full ? attention_mask::m_none : attention_mask::m_causal, scale, stream);
  } else if (!shared && a.k.strides[0] == a.v.strides[0] && a.k.strides[0] == S * hkv * d &&
             all_full) {
    // Dense [B, S, Hkv, D] cache, every sequence full: B sequences of one query.
    launch_decode<T>(q, k, v, out.o, out.lse, static_cast<int>(B), 1, S, S, hq, hkv, d, splits,
                     attention_mask::m_none, scale, stream);
  } else {
    for (std::int64_t i = 0; i < B; ++i) {
      const std::int64_t kv_off = i * a.k.strides[0];
      if (a.v.strides[0] != a.k.strides[0])
        throw refused{NUMPROBE_STATUS_UNSUPPORTED, "k and v must share their first-axis stride"};
      launch_decode<T>(q + i * hq * d, k + kv_off, v + kv_off, out.o + i * hq * d, out.lse + i * hq, 1, 1,
                       lens[static_cast<std::size_t>(i)], S, hq, hkv, d, splits, attention_mask::m_none,
                       scale, stream);
    }
  }
  out.finish();
}

// What both decode entries check: sizes, head_dim, softcap, dtypes (k/v those of q when
// kv_input), the layouts: q/o [rows, Hq, D], lse [rows, Hq], k/v [B, max_seq, Hkv, D] dense
// within a sequence (first-axis stride any >= 0).
void check_decode(const numprobe_decode_params& a, std::int64_t rows, bool kv_input) {
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
  if ((kv_input && (a.k.dtype != dt || a.v.dtype != dt)) || (a.o.dtype != dt && a.o.dtype != NUMPROBE_DTYPE_F32))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "q, k, v must share one dtype (bf16 or f16); o that dtype or f32"};
  if ((a.lse.data != nullptr && a.lse.dtype != NUMPROBE_DTYPE_F32) ||
      (a.seq_lens.data != nullptr && a.seq_lens.dtype != NUMPROBE_DTYPE_I32))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "lse must be f32 and seq_lens i32"};
  const std::int64_t hd = a.kv_heads * a.head_dim;
  const auto cache_ok = [&](const numprobe_tensor& t) {
    return t.ndim == 4 && t.shape[0] == B && t.shape[1] == S && t.shape[2] == a.kv_heads &&
           t.shape[3] == a.head_dim && t.strides[3] == 1 && t.strides[2] == a.head_dim &&
           t.strides[1] == hd && t.strides[0] >= 0;
  };
  if (!dense(a.q, {rows, a.heads, a.head_dim}) || !dense(a.o, {rows, a.heads, a.head_dim}) ||
      (a.seq_lens.data != nullptr && !dense(a.seq_lens, {B})) || !cache_ok(a.k) || !cache_ok(a.v) ||
      (a.lse.data != nullptr && !dense(a.lse, {rows, a.heads})))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED,
                  "q/o/lse/seq_lens dense; k/v [B, max_seq, Hkv, D] dense within a sequence "
                  "(first-axis stride any >= 0)"};
}

// The device-pointer entry point of the split-KV decode.
void decode_on_device(const numprobe_decode_params& a) {
  check_decode(a, a.batch, true);
  const int dt = a.q.dtype;
  if (a.seq_lens.data == nullptr) throw refused{NUMPROBE_STATUS_INVALID, "seq_lens is null"};
  NUMPROBE_GPU_CHECK(SetDevice, a.device);
  const auto stream = static_cast<platform::stream_t>(a.stream);
  const std::vector<std::int32_t> lens = read_lens(a, stream);
  if (dt == NUMPROBE_DTYPE_F16) decode_typed<platform::fp16>(a, lens, stream);
  else decode_typed<platform::bf16>(a, lens, stream);
}

// ------------------------------------------------------------------ numprobe_attention_decode_variant

struct decode_variant_call {
  const numprobe_decode_params* params;
  const numprobe_decode_variant* variant;
};

// The launch shape a checked variant asks for.
struct variant_plan {
  int t = 1, splits = 4;
  std::int64_t chunk = 0;
  attention_mask mask = attention_mask::m_none;
  bool fp8_kv = false, per_head = false;
};

void check_scale(const numprobe_tensor& s, std::int64_t n, const char* name) {
  if (s.data == nullptr || s.dtype != NUMPROBE_DTYPE_F32 || !dense(s, {n}))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, std::string(name) + " must be f32 [" + std::to_string(n) +
                                                   "] (e4m3fn KV storage)"};
}

variant_plan check_variant(const numprobe_decode_params& a, const numprobe_decode_variant& v) {
  if (v.struct_size < sizeof(numprobe_decode_variant))
    throw refused{NUMPROBE_STATUS_INVALID, "numprobe_decode_variant is smaller than this plugin's"};
  variant_plan plan;
  if (v.queries < 0 || v.queries > decode::k_decode_max_t)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "the decode kernel takes T = 1..8 queries per sequence"};
  plan.t = v.queries == 0 ? 1 : static_cast<int>(v.queries);
  check_decode(a, a.batch * plan.t, v.kv_storage == NUMPROBE_KV_INPUT);
  const std::int64_t S = a.max_seq;
  if (v.split_size < 0) throw refused{NUMPROBE_STATUS_INVALID, "split_size must be >= 0"};
  if (v.split_size > 0) {
    const std::int64_t n = (S + v.split_size - 1) / v.split_size;
    if (n > 65535) throw refused{NUMPROBE_STATUS_UNSUPPORTED, "more than 65535 splits of split_size keys"};
    if (a.num_splits != 0 && a.num_splits != n)
      throw refused{NUMPROBE_STATUS_INVALID, "num_splits must be 0 or ceil(max_seq / split_size)"};
    plan.splits = static_cast<int>(n);
    plan.chunk = v.split_size;
  } else {
    plan.splits = a.num_splits > 0 ? static_cast<int>(a.num_splits) : 4;
    plan.chunk = (S + plan.splits - 1) / plan.splits;
  }
  plan.mask = to_mask(v.mask);
  if (plan.mask == attention_mask::m_window && v.window < 1)
    throw refused{NUMPROBE_STATUS_INVALID, "a sliding window needs W >= 1"};
  if ((v.variant & ~k_decode_faults) != 0)
    throw refused{NUMPROBE_STATUS_UNSUPPORTED,
                  "variant bits " + std::to_string(v.variant & ~k_decode_faults) +
                      " are no decode fault; the decode kernel's faults are " +
                      kernels::fault_names(kernels::k_gpu_decode)};
  switch (v.kv_storage) {
    case NUMPROBE_KV_INPUT: break;  // k, v dtypes: check_decode
    case NUMPROBE_KV_E4M3FN_TENSOR:
    case NUMPROBE_KV_E4M3FN_HEAD: {
      plan.fp8_kv = true;
      plan.per_head = v.kv_storage == NUMPROBE_KV_E4M3FN_HEAD;
      if (a.k.dtype != NUMPROBE_DTYPE_E4M3FN || a.v.dtype != NUMPROBE_DTYPE_E4M3FN)
        throw refused{NUMPROBE_STATUS_UNSUPPORTED, "e4m3fn KV storage: k and v must be e4m3fn codes"};
      const std::int64_t n = plan.per_head ? a.kv_heads : 1;
      check_scale(v.k_scale, n, "k_scale");
      check_scale(v.v_scale, n, "v_scale");
      break;
    }
    default:
      throw refused{NUMPROBE_STATUS_UNSUPPORTED, "unknown kv_storage " + std::to_string(v.kv_storage)};
  }
  if (v.p_e4m3 != 0 && v.p_e4m3 != 1) throw refused{NUMPROBE_STATUS_INVALID, "p_e4m3 must be 0 or 1"};
  if (v.p_e4m3 && !(v.p_prescale > 0.f && v.p_prescale < 3.0e38f))
    throw refused{NUMPROBE_STATUS_INVALID, "p_prescale must be finite and > 0"};
  if (v.acc_promote < 0) throw refused{NUMPROBE_STATUS_INVALID, "acc_promote must be >= 0"};
  if (v.acc_promote > 0 && (v.acc_mantissa < 1 || v.acc_mantissa > 23))
    throw refused{NUMPROBE_STATUS_INVALID, "acc_mantissa must be 1..23"};
  if (v.split_lse.data != nullptr &&
      (v.split_lse.dtype != NUMPROBE_DTYPE_F32 || !dense(v.split_lse, {plan.splits, a.batch * plan.t, a.heads})))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "split_lse must be f32 [splits, B*T, Hq]"};
  if (v.workspace.data != nullptr &&
      (v.workspace.dtype != NUMPROBE_DTYPE_F32 ||
       !dense(v.workspace, {plan.splits, a.batch * plan.t, a.heads, a.head_dim})))
    throw refused{NUMPROBE_STATUS_UNSUPPORTED, "workspace must be f32 [splits, B*T, Hq, D]"};
  return plan;
}

template <class T, class KV>
void decode_variant_typed(const numprobe_decode_params& a, const numprobe_decode_variant& v,
                          const variant_plan& plan, platform::stream_t stream) {
  const std::int64_t B = a.batch, S = a.max_seq;
  decode::params<T, KV> p;
  p.k_scale = plan.fp8_kv ? static_cast<const float*>(v.k_scale.data) : nullptr;
  p.v_scale = plan.fp8_kv ? static_cast<const float*>(v.v_scale.data) : nullptr;
  p.per_head_scale = plan.per_head;
  p.t = plan.t;
  p.hq = static_cast<int>(a.heads);
  p.hkv = static_cast<int>(a.kv_heads);
  p.d = static_cast<int>(a.head_dim);
  p.splits = plan.splits;
  p.chunk = plan.chunk;
  p.window = v.window;
  p.mask = plan.mask;
  p.scale_log2 = static_cast<float>(a.scale) * decode::k_log2e_f;  // as flash_decode.cu
  p.p_fp8 = v.p_e4m3 != 0;
  p.p_prescale = v.p_prescale;
  p.acc_promote = v.acc_promote;
  p.acc_mantissa = v.acc_mantissa;
  p.faults = v.variant;
  const decode_outputs<T> out(a.o, a.lse, B * plan.t, a.heads, a.head_dim, stream);
  // One sequence at a time takes its own [splits, T, Hq, D] slice, so every slice is poisoned.
  auto* workspace = static_cast<float*>(v.workspace.data);
  const T* q = static_cast<const T*>(a.q.data);
  const KV* k = static_cast<const KV*>(a.k.data);
  const KV* kv_v = static_cast<const KV*>(a.v.data);
  const bool dense_cache = a.k.strides[0] == S * a.kv_heads * a.head_dim && a.v.strides[0] == a.k.strides[0];
  std::vector<std::int32_t> lens;
  if (a.seq_lens.data != nullptr) lens = read_lens(a, stream);
  const bool all_full = std::all_of(lens.begin(), lens.end(), [&](std::int32_t n) { return n == S; });
  if (dense_cache && all_full) {
    // `--backend cuda --decode`'s launch: B sequences of T queries over S keys each.
    p.q = q;
    p.k = k;
    p.v = kv_v;
    p.o = out.o;
    p.lse = out.lse;
    p.lse_part = static_cast<float*>(v.split_lse.data);
    p.batch = static_cast<int>(B);
    p.s = S;
    launch_split_merge(p, workspace, stream);
  } else {
    if (v.split_lse.data != nullptr)
      throw refused{NUMPROBE_STATUS_UNSUPPORTED,
                    "split_lse needs every sequence full (seq_lens max_seq) on a dense k/v cache"};
    if (a.v.strides[0] != a.k.strides[0])
      throw refused{NUMPROBE_STATUS_UNSUPPORTED, "k and v must share their first-axis stride"};
    const std::int64_t rows = static_cast<std::int64_t>(plan.t) * a.heads;
    for (std::int64_t i = 0; i < B; ++i) {
      p.q = q + i * rows * a.head_dim;
      p.k = k + i * a.k.strides[0];
      p.v = kv_v + i * a.k.strides[0];
      p.o = out.o + i * rows * a.head_dim;
      p.lse = out.lse + i * rows;
      p.lse_part = nullptr;
      p.batch = 1;
      p.s = lens.empty() ? S : lens[static_cast<std::size_t>(i)];
      launch_split_merge(p, workspace ? workspace + i * plan.splits * rows * a.head_dim : nullptr, stream);
    }
  }
  out.finish();
}

template <class T>
void decode_variant_kv(const numprobe_decode_params& a, const numprobe_decode_variant& v,
                       const variant_plan& plan, platform::stream_t stream) {
  if (plan.fp8_kv) decode_variant_typed<T, std::uint8_t>(a, v, plan, stream);
  else decode_variant_typed<T, T>(a, v, plan, stream);
}

void decode_variant_on_device(const decode_variant_call& c) {
  if (!c.params || !c.variant) throw refused{NUMPROBE_STATUS_INVALID, "null parameters"};
  const variant_plan plan = check_variant(*c.params, *c.variant);
  NUMPROBE_GPU_CHECK(SetDevice, c.params->device);
  const auto stream = static_cast<platform::stream_t>(c.params->stream);
  if (c.params->q.dtype == NUMPROBE_DTYPE_F16) decode_variant_kv<platform::fp16>(*c.params, *c.variant, plan, stream);
  else decode_variant_kv<platform::bf16>(*c.params, *c.variant, plan, stream);
}

}  // namespace

int attention_decode(const numprobe_decode_params* p) { return guarded_call(p, decode_on_device); }

int attention_decode_variant(const numprobe_decode_params* p, const numprobe_decode_variant* v) {
  const decode_variant_call c{p, v};
  return guarded_call(&c, decode_variant_on_device);
}

}  // namespace numprobe::gpu::plugin
