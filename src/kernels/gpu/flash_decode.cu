// Host side of split-KV decode: validation, buffers (outputs and split workspace poisoned with
// NaN first), launches, timing. Exports cuda_decode_api() / hip_decode_api(). The launch is
// either direct or, with decode_request::abi_decode, the built-in kernel table's
// numprobe_attention_decode_variant over the same device buffers (launch_through_abi).
#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/builtin_entry_support.cuh"
#include "src/kernels/gpu/builtin_kernel_table.hpp"
#include "src/kernels/gpu/flash_decode.cuh"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/gpu_host_util.cuh"

namespace numprobe::gpu {
namespace {

template <class T>
__global__ void to_dtype(const float* __restrict__ in, T* __restrict__ out, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = platform::from_float<T>(in[i]);
}

template <class T>
void upload_as(const float* host, const host::buffer& staging, const host::buffer& dst,
               std::int64_t n) {
  NUMPROBE_GPU_CHECK(Memcpy, staging.as<float>(), host, n * sizeof(float), platform::memcpy_h2d);
  const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>((n + 255) / 256, 1, 65536));
  to_dtype<T><<<blocks, 256>>>(staging.as<float>(), dst.as<T>(), n);
  check_launch("to_dtype");
}

// decode_request::abi_decode: the launch of `p` as a plugin-ABI call on the default stream.
// Every sequence holds S keys (seq_lens NULL: no read-back of lengths), the cache is dense
// [B, S, Hkv, D], O comes back in f32 (the dtype's values widened, as the direct merge writes
// them) and the split LSE into p.lse_part, so the device buffers are the direct launch's. A
// failure rethrows the table's own exception, so its exit code and text are the direct launch's.
template <class T, class KV>
void launch_through_abi(const decode_request& r, const decode::params<T, KV>& p, int nscale,
                        const std::int32_t* seq_lens_device) {
  constexpr int dt = std::is_same_v<T, platform::fp16> ? NUMPROBE_DTYPE_F16 : NUMPROBE_DTYPE_BF16;
  constexpr bool fp8 = std::is_same_v<KV, std::uint8_t>;
  constexpr int kv_dt = fp8 ? NUMPROBE_DTYPE_E4M3FN : dt;
  const std::int64_t rows = r.batch * r.t;
  numprobe_decode_params a{};
  a.struct_size = sizeof(a);
  a.batch = r.batch;
  a.max_seq = r.s;
  a.heads = r.hq;
  a.kv_heads = r.hkv;
  a.head_dim = r.d;
  a.num_splits = p.splits;
  a.scale = r.scale;  // already fp32: the entry rounds it to the same float
  a.softcap = 0.0;
  a.q = dense_abi_tensor(p.q, dt, {rows, r.hq, r.d});
  a.k = dense_abi_tensor(p.k, kv_dt, {r.batch, r.s, r.hkv, r.d});
  a.v = dense_abi_tensor(p.v, kv_dt, {r.batch, r.s, r.hkv, r.d});
  a.seq_lens = dense_abi_tensor(seq_lens_device, NUMPROBE_DTYPE_I32, {r.batch});
  a.o = dense_abi_tensor(p.o, NUMPROBE_DTYPE_F32, {rows, r.hq, r.d});
  a.lse = dense_abi_tensor(p.lse, NUMPROBE_DTYPE_F32, {rows, r.hq});
  a.memory = plugin::k_memory;
  a.device = r.device;
  a.stream = nullptr;  // the default stream, the direct launch's
  numprobe_decode_variant v{};
  v.struct_size = sizeof(v);
  v.variant = r.faults;
  v.queries = r.t;
  v.mask = static_cast<std::int32_t>(r.mask);  // gpu::attention_mask follows numprobe_mask's order
  v.window = r.window;
  v.split_size = r.split_size;
  v.kv_storage = r.kv == kv_format::m_e4m3_head     ? NUMPROBE_KV_E4M3FN_HEAD
                 : r.kv == kv_format::m_e4m3_tensor ? NUMPROBE_KV_E4M3FN_TENSOR
                                                    : NUMPROBE_KV_INPUT;
  if constexpr (fp8) {
    v.k_scale = dense_abi_tensor(p.k_scale, NUMPROBE_DTYPE_F32, {nscale});
    v.v_scale = dense_abi_tensor(p.v_scale, NUMPROBE_DTYPE_F32, {nscale});
  }
  v.p_e4m3 = r.p_e4m3 ? 1 : 0;
  v.p_prescale = r.p_prescale;
  v.acc_promote = r.acc_promote;
  v.acc_mantissa = r.acc_mantissa;
  // A ragged batch runs one launch per sequence, with no split LSE (builtin_decode_entry.cu).
  v.split_lse = dense_abi_tensor(seq_lens_device ? nullptr : p.lse_part, NUMPROBE_DTYPE_F32, {p.splits, rows, r.hq});
  v.workspace = dense_abi_tensor(p.o_part, NUMPROBE_DTYPE_F32, {p.splits, rows, r.hq, r.d});
  if (const int status = r.abi_decode(&a, &v); status != NUMPROBE_STATUS_OK) {
    if (const std::exception_ptr e = builtin_last_exception()) std::rethrow_exception(e);
    const char* msg = r.abi_last_error ? r.abi_last_error() : nullptr;
    throw_backend_error(platform::vendor, "numprobe_attention_decode_variant returned status " +
                                              std::to_string(status) + (msg && *msg ? std::string(": ") + msg : ""));
  }
}

template <class T, class KV>
decode_result run_typed(const decode_request& r) {
  const std::int64_t nq = r.batch * r.t * r.hq * r.d;
  const std::int64_t nkv = r.batch * r.s * r.hkv * r.d;
  const std::int64_t nrow = r.batch * r.t * r.hq;
  constexpr bool fp8 = std::is_same_v<KV, std::uint8_t>;
  host::buffer staging(static_cast<std::size_t>(std::max(nq, fp8 ? nq : nkv)) * 4, "staging");
  host::buffer q(nq * sizeof(T), "q"), k(nkv * sizeof(KV), "k"), v(nkv * sizeof(KV), "v");
  const int nscale = r.kv == kv_format::m_e4m3_head ? static_cast<int>(r.hkv) : 1;
  host::buffer ks(fp8 ? nscale * 4 : 0, "k_scale"), vs(fp8 ? nscale * 4 : 0, "v_scale");
  // Through the ABI too, the split partials are this buffer (the variant's workspace), poisoned
  // here outside the timed region: the launches inside the events are the direct path's.
  host::buffer o_part(static_cast<std::size_t>(r.splits) * nq * 4, "o_part");
  host::buffer lse_part(static_cast<std::size_t>(r.splits) * nrow * 4, "lse_part");
  host::buffer o(nq * 4, "o"), lse(nrow * 4, "lse");
  host::buffer lens(r.seq_lens ? static_cast<std::size_t>(r.batch) * 4 : 0, "seq_lens");
  if (r.seq_lens)
    NUMPROBE_GPU_CHECK(Memcpy, lens.as<void>(), r.seq_lens, r.batch * 4, platform::memcpy_h2d);
  upload_as<T>(r.q, staging, q, nq);
  if constexpr (fp8) {
    NUMPROBE_GPU_CHECK(Memcpy, k.as<void>(), r.k8, nkv, platform::memcpy_h2d);
    NUMPROBE_GPU_CHECK(Memcpy, v.as<void>(), r.v8, nkv, platform::memcpy_h2d);
    NUMPROBE_GPU_CHECK(Memcpy, ks.as<void>(), r.k_scale, nscale * 4, platform::memcpy_h2d);
    NUMPROBE_GPU_CHECK(Memcpy, vs.as<void>(), r.v_scale, nscale * 4, platform::memcpy_h2d);
  } else {
    upload_as<T>(r.k, staging, k, nkv);
    upload_as<T>(r.v, staging, v, nkv);
  }
  o_part.poison();
  lse_part.poison();
  o.poison();
  lse.poison();

  decode::params<T, KV> p;
  p.q = q.as<T>();
  p.k = k.as<KV>();
  p.v = v.as<KV>();
  p.k_scale = fp8 ? ks.as<float>() : nullptr;
  p.v_scale = fp8 ? vs.as<float>() : nullptr;
  p.per_head_scale = r.kv == kv_format::m_e4m3_head;
  p.o_part = o_part.as<float>();
  p.lse_part = lse_part.as<float>();
  p.o = o.as<float>();
  p.lse = lse.as<float>();
  p.batch = static_cast<int>(r.batch);
  p.t = static_cast<int>(r.t);
  p.hq = static_cast<int>(r.hq);
  p.hkv = static_cast<int>(r.hkv);
  p.d = static_cast<int>(r.d);
  p.splits = r.splits;
  p.s = r.s;
  p.chunk = r.split_size > 0 ? r.split_size : (r.s + r.splits - 1) / r.splits;
  p.window = r.window;
  p.mask = r.mask;
  p.scale_log2 = r.scale * decode::k_log2e_f;
  p.p_fp8 = r.p_e4m3;
  p.p_prescale = r.p_prescale;
  p.acc_promote = r.acc_promote;
  p.acc_mantissa = r.acc_mantissa;
  p.faults = r.faults;

  host::event e0, e1;
  NUMPROBE_GPU_CHECK(EventRecord, e0.get(), nullptr);
  if (r.abi_decode) {
    launch_through_abi(r, p, nscale, r.seq_lens ? lens.as<std::int32_t>() : nullptr);
  } else {
    decode::decode_split<T, KV><<<dim3(r.splits, p.hq, p.batch), decode::k_decode_threads>>>(p);
    check_launch("decode_split");
    decode::decode_merge<T, KV><<<static_cast<unsigned>(nrow), 128>>>(p);
    check_launch("decode_merge");
  }
  NUMPROBE_GPU_CHECK(EventRecord, e1.get(), nullptr);
  decode_result out;
  out.kernel_ms = host::elapsed_ms(e0, e1);
  out.o.resize(static_cast<std::size_t>(nq));
  out.lse.resize(static_cast<std::size_t>(nrow));
  out.split_lse.resize(r.seq_lens ? 0 : static_cast<std::size_t>(r.splits * nrow));
  NUMPROBE_GPU_CHECK(Memcpy, out.o.data(), o.as<void>(), nq * 4, platform::memcpy_d2h);
  NUMPROBE_GPU_CHECK(Memcpy, out.lse.data(), lse.as<void>(), nrow * 4, platform::memcpy_d2h);
  if (!out.split_lse.empty())
    NUMPROBE_GPU_CHECK(Memcpy, out.split_lse.data(), lse_part.as<void>(), out.split_lse.size() * 4,
                       platform::memcpy_d2h);
  NUMPROBE_GPU_CHECK(DeviceSynchronize);
  return out;
}

decode_result decode_impl(const decode_request& req) {
  decode_request r = req;
  if (r.split_size < 0) throw_input_error("--split-size", "must be positive");
  if (r.split_size > 0) {
    const std::int64_t n = (r.s + r.split_size - 1) / r.split_size;
    if (n > 65535) throw_input_error("--split-size", "more than 65535 splits; use a larger split size");
    r.splits = static_cast<int>(std::max<std::int64_t>(n, 1));
  }
  if (r.seq_lens != nullptr) {
    if (r.abi_decode == nullptr)
      throw_input_error("seq_lens", "a ragged batch goes through the kernel table's decode entry only");
    for (std::int64_t b = 0; b < r.batch; ++b)
      if (r.seq_lens[b] < 1 || r.seq_lens[b] > r.s) throw_input_error("seq_lens", "a length outside [1, S]");
  }
  if (r.batch < 1 || r.t < 1 || r.s < 1 || r.hq < 1 || r.hkv < 1 || r.hq % r.hkv != 0)
    throw_input_error("decode case", "the decode kernel needs B, T, S, Hq, Hkv >= 1 and Hkv | Hq");
  if (r.t > decode::k_decode_max_t)
    throw_input_error("decode case", "the decode kernel takes T = 1..8 new queries");
  if (r.d < 1 || r.d > decode::k_decode_max_d)
    throw_input_error("head_dim", "the decode kernel takes head_dim 1..256");
  if (r.splits < 1 || r.splits > 65535) throw_input_error("--splits", "splits must be 1..65535");
  if (r.mask == attention_mask::m_window && r.window < 1)
    throw_input_error("--window", "a sliding window needs W >= 1");
  if (r.batch > 65535 || r.hq > 65535) throw_input_error("decode case", "B and Hq <= 65535");
  if (r.p_e4m3 && !(r.p_prescale > 0.f && r.p_prescale < 3.0e38f))
    throw_input_error("--p-prescale", "must be finite and > 0");
  if (r.acc_promote < 0) throw_input_error("--acc-promote", "must be >= 0");
  if (r.acc_mantissa < 1 || r.acc_mantissa > 23) throw_input_error("acc_mantissa", "must be 1..23");
  if ((r.faults & ~k_decode_faults) != 0)
    throw_input_error("--inject", "the decode kernel's faults are " + kernels::fault_names(kernels::k_gpu_decode));
  const bool fp8 = r.kv != kv_format::m_input;
  if (fp8 && (!r.k8 || !r.v8 || !r.k_scale || !r.v_scale))
    throw_input_error("kv", "the FP8 KV variant needs e4m3 codes and scales");
  if (!r.q || (!fp8 && (!r.k || !r.v))) throw_input_error("decode case", "missing inputs");
  host::select_device(r.device);
  if (r.fp16)
    return fp8 ? run_typed<platform::fp16, std::uint8_t>(r) : run_typed<platform::fp16, platform::fp16>(r);
  return fp8 ? run_typed<platform::bf16, std::uint8_t>(r) : run_typed<platform::bf16, platform::bf16>(r);
}

}  // namespace

const decode_api& NUMPROBE_GPU_DECODE_API_NAME() {
  static const decode_api api{platform::vendor, &decode_impl};
  return api;
}

}  // namespace numprobe::gpu
