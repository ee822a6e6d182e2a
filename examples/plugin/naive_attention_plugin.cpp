// A minimal numprobe kernel plugin: naive fp32 attention on host buffers.
// Build: see README.md. Use: numprobe attention --backend plugin:./libnumprobe_example_plugin.so
//
// It reads q/k/v as float32 (numprobe passes values exact in the case's dtype), keeps scores
// and sums in float and writes o as float32 and the natural-log lse. It honours the strides it
// is given, the bottom-right causal/window masks, GQA (h / group) and fully masked rows.
//
// It also exports the optional split-KV decode (NUMPROBE_OP_DECODE): sequence i's keys
// [0, seq_lens[i]) are cut at multiples of chunk = ceil(max_seq / num_splits); each split keeps
// its own (O_i, LSE_i) in float, and the splits are merged by the log-sum-exp rule
//   LSE = m + log sum exp(LSE_i - m),  O = sum exp(LSE_i - LSE) O_i   (m = max LSE_i),
// skipping empty splits (a split past seq_lens[i], or every split when seq_lens[i] = 0, which
// gives O = 0, LSE = -inf). numprobe passes the K/V cache with stride 0 on the first axis when
// several queries share one cache: the strides are honoured.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "numprobe/kernel_abi.h"

namespace {

thread_local const char* g_last_error = "";

int refuse(int status, const char* why) {
  g_last_error = why;
  return status;
}

const float* at(const numprobe_tensor& t, int64_t i0, int64_t i1, int64_t i2) {
  return static_cast<const float*>(t.data) + i0 * t.strides[0] + i1 * t.strides[1] + i2 * t.strides[2];
}

}  // namespace

extern "C" {

NUMPROBE_PLUGIN_EXPORT uint32_t numprobe_kernel_abi_version(void) {
  return NUMPROBE_KERNEL_ABI_VERSION;
}

NUMPROBE_PLUGIN_EXPORT int numprobe_kernel_capabilities(numprobe_capabilities* caps) {
  if (!caps || caps->struct_size < sizeof(numprobe_capabilities))
    return refuse(NUMPROBE_STATUS_INVALID, "capabilities struct too small");
  caps->abi_version = NUMPROBE_KERNEL_ABI_VERSION;
  caps->name = "naive-fp32";
  caps->description = "example plugin: naive float32 attention on the host";
#ifdef NUMPROBE_EXAMPLE_NO_DECODE
  caps->ops = NUMPROBE_OP_ATTENTION_FORWARD;  // the tests' forward-only build
#else
  caps->ops = NUMPROBE_OP_ATTENTION_FORWARD | NUMPROBE_OP_DECODE;
#endif
  caps->features = NUMPROBE_FEATURE_LSE | NUMPROBE_FEATURE_BATCH | NUMPROBE_FEATURE_SOFTCAP;
  caps->input_dtypes = 1u << NUMPROBE_DTYPE_F32;
  caps->output_dtypes = 1u << NUMPROBE_DTYPE_F32;
  caps->masks = (1u << NUMPROBE_MASK_NONE) | (1u << NUMPROBE_MASK_CAUSAL) |
                (1u << NUMPROBE_MASK_CAUSAL_TOP_LEFT) | (1u << NUMPROBE_MASK_WINDOW);
  caps->memory = NUMPROBE_MEMORY_HOST;
  caps->tile_q = 0;  // no tiles: an untiled kernel
  caps->tile_k = 0;
  caps->max_head_dim = 0;
  return NUMPROBE_STATUS_OK;
}

NUMPROBE_PLUGIN_EXPORT int numprobe_attention_forward(const numprobe_attention_params* p) {
  if (!p || p->struct_size < sizeof(numprobe_attention_params))
    return refuse(NUMPROBE_STATUS_INVALID, "params struct too small");
  if (p->memory != NUMPROBE_MEMORY_HOST) return refuse(NUMPROBE_STATUS_UNSUPPORTED, "host memory only");
  if (p->q.dtype != NUMPROBE_DTYPE_F32 || p->k.dtype != NUMPROBE_DTYPE_F32 ||
      p->v.dtype != NUMPROBE_DTYPE_F32 || p->o.dtype != NUMPROBE_DTYPE_F32)
    return refuse(NUMPROBE_STATUS_UNSUPPORTED, "float32 buffers only");
  const int64_t B = p->batch, T = p->queries, S = p->seq, Hq = p->heads, D = p->head_dim;
  const int64_t group = Hq / p->kv_heads;
  std::vector<float> s(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      // Visible keys [lo, hi): bottom-right alignment, query t at absolute position S - T + t.
      const int64_t pos = S - T + t;
      int64_t lo = 0, hi = S;
      if (p->mask == NUMPROBE_MASK_CAUSAL) hi = pos + 1;
      if (p->mask == NUMPROBE_MASK_CAUSAL_TOP_LEFT) hi = t + 1;
      if (p->mask == NUMPROBE_MASK_WINDOW) { hi = pos + 1; lo = pos - p->window + 1; }
      lo = lo < 0 ? 0 : lo;
      hi = hi > S ? S : hi;
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kvh = h / group;
        float* o = static_cast<float*>(p->o.data) + (b * T + t) * p->o.strides[0] + h * p->o.strides[1];
        float* lse = p->lse.data ? static_cast<float*>(p->lse.data) + (b * T + t) * p->lse.strides[0] +
                                       h * p->lse.strides[1]
                                 : nullptr;
        if (hi <= lo) {  // fully masked: O = 0, LSE = -inf
          for (int64_t d = 0; d < D; ++d) o[d * p->o.strides[2]] = 0.0f;
          if (lse) *lse = -std::numeric_limits<float>::infinity();
          continue;
        }
        const float* q = at(p->q, b * T + t, h, 0);
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = lo; j < hi; ++j) {
          const float* k = at(p->k, b * S + j, kvh, 0);
          float acc = 0.0f;
          for (int64_t d = 0; d < D; ++d) acc += q[d * p->q.strides[2]] * k[d * p->k.strides[2]];
          float x = acc * static_cast<float>(p->scale);
          if (p->softcap > 0) x = static_cast<float>(p->softcap * std::tanh(x / p->softcap));
          s[static_cast<size_t>(j)] = x;
          m = x > m ? x : m;
        }
        float l = 0.0f;
        for (int64_t j = lo; j < hi; ++j) {
          s[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - m);
          l += s[static_cast<size_t>(j)];
        }
        for (int64_t d = 0; d < D; ++d) {
          float acc = 0.0f;
          for (int64_t j = lo; j < hi; ++j) acc += s[static_cast<size_t>(j)] * at(p->v, b * S + j, kvh, 0)[d * p->v.strides[2]];
          o[d * p->o.strides[2]] = acc / l;
        }
        if (lse) *lse = m + std::log(l);
      }
    }
  return NUMPROBE_STATUS_OK;
}

#ifndef NUMPROBE_EXAMPLE_NO_DECODE
NUMPROBE_PLUGIN_EXPORT int numprobe_attention_decode(const numprobe_decode_params* p) {
  if (!p || p->struct_size < sizeof(numprobe_decode_params))
    return refuse(NUMPROBE_STATUS_INVALID, "decode params struct too small");
  if (p->memory != NUMPROBE_MEMORY_HOST) return refuse(NUMPROBE_STATUS_UNSUPPORTED, "host memory only");
  if (p->q.dtype != NUMPROBE_DTYPE_F32 || p->k.dtype != NUMPROBE_DTYPE_F32 ||
      p->v.dtype != NUMPROBE_DTYPE_F32 || p->o.dtype != NUMPROBE_DTYPE_F32 ||
      p->seq_lens.dtype != NUMPROBE_DTYPE_I32)
    return refuse(NUMPROBE_STATUS_UNSUPPORTED, "float32 q/k/v/o and int32 seq_lens only");
  if (p->batch < 1 || p->max_seq < 1 || p->heads < 1 || p->kv_heads < 1 || p->heads % p->kv_heads != 0 ||
      p->num_splits < 0)
    return refuse(NUMPROBE_STATUS_INVALID, "needs B, S_max, Hq, Hkv >= 1, Hkv | Hq, num_splits >= 0");
  const int64_t B = p->batch, S = p->max_seq, Hq = p->heads, D = p->head_dim;
  const int64_t group = Hq / p->kv_heads;
  const int64_t splits = p->num_splits > 0 ? p->num_splits : 1;
  const int64_t chunk = (S + splits - 1) / splits;
  const float ninf = -std::numeric_limits<float>::infinity();
  const int32_t* lens = static_cast<const int32_t*>(p->seq_lens.data);
  std::vector<float> s(static_cast<size_t>(chunk)), o_part(static_cast<size_t>(splits * D)),
      lse_part(static_cast<size_t>(splits));
  const auto kv_at = [](const numprobe_tensor& t, int64_t b, int64_t j, int64_t h, int64_t d) {
    return static_cast<const float*>(t.data)[b * t.strides[0] + j * t.strides[1] + h * t.strides[2] +
                                             d * t.strides[3]];
  };
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lens[b * p->seq_lens.strides[0]];
    if (n < 0 || n > S) return refuse(NUMPROBE_STATUS_INVALID, "seq_lens[b] outside [0, max_seq]");
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kvh = h / group;
      const float* q = at(p->q, b, h, 0);
      for (int64_t i = 0; i < splits; ++i) {  // split i: keys [i chunk, min((i+1) chunk, n))
        const int64_t lo = i * chunk, hi = (i + 1) * chunk < n ? (i + 1) * chunk : n;
        float* oi = &o_part[static_cast<size_t>(i * D)];
        if (hi <= lo) {
          lse_part[static_cast<size_t>(i)] = ninf;
          continue;
        }
        float m = ninf;
        for (int64_t j = lo; j < hi; ++j) {
          float acc = 0.0f;
          for (int64_t d = 0; d < D; ++d) acc += q[d * p->q.strides[2]] * kv_at(p->k, b, j, kvh, d);
          float x = acc * static_cast<float>(p->scale);
          if (p->softcap > 0) x = static_cast<float>(p->softcap * std::tanh(x / p->softcap));
          s[static_cast<size_t>(j - lo)] = x;
          m = x > m ? x : m;
        }
        float l = 0.0f;
        for (int64_t j = lo; j < hi; ++j) {
          s[static_cast<size_t>(j - lo)] = std::exp(s[static_cast<size_t>(j - lo)] - m);
          l += s[static_cast<size_t>(j - lo)];
        }
        for (int64_t d = 0; d < D; ++d) {
          float acc = 0.0f;
          for (int64_t j = lo; j < hi; ++j) acc += s[static_cast<size_t>(j - lo)] * kv_at(p->v, b, j, kvh, d);
          oi[d] = acc / l;
        }
        lse_part[static_cast<size_t>(i)] = m + std::log(l);
      }
      // Merge over the non-empty splits.
      float* o = static_cast<float*>(p->o.data) + b * p->o.strides[0] + h * p->o.strides[1];
      float* lse = p->lse.data ? static_cast<float*>(p->lse.data) + b * p->lse.strides[0] + h * p->lse.strides[1]
                               : nullptr;
      float mx = ninf;
      for (int64_t i = 0; i < splits; ++i) mx = lse_part[static_cast<size_t>(i)] > mx ? lse_part[static_cast<size_t>(i)] : mx;
      if (mx == ninf) {  // no visible key: O = 0, LSE = -inf
        for (int64_t d = 0; d < D; ++d) o[d * p->o.strides[2]] = 0.0f;
        if (lse) *lse = ninf;
        continue;
      }
      float sum = 0.0f;
      for (int64_t i = 0; i < splits; ++i)
        if (lse_part[static_cast<size_t>(i)] != ninf) sum += std::exp(lse_part[static_cast<size_t>(i)] - mx);
      const float total = mx + std::log(sum);
      for (int64_t d = 0; d < D; ++d) {
        float acc = 0.0f;
        for (int64_t i = 0; i < splits; ++i)
          if (lse_part[static_cast<size_t>(i)] != ninf)
            acc += std::exp(lse_part[static_cast<size_t>(i)] - total) * o_part[static_cast<size_t>(i * D + d)];
        o[d * p->o.strides[2]] = acc;
      }
      if (lse) *lse = total;
    }
  }
  return NUMPROBE_STATUS_OK;
}
#endif

NUMPROBE_PLUGIN_EXPORT const char* numprobe_kernel_last_error(void) { return g_last_error; }

}  // extern "C"
