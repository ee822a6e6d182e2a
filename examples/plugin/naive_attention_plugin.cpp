// A minimal numprobe kernel plugin: naive fp32 attention on host buffers.
// Build: see README.md. Use: numprobe attention --backend plugin:./libnumprobe_example_plugin.so
//
// It reads q/k/v as float32 (numprobe passes values exact in the case's dtype), keeps scores
// and sums in float and writes o as float32 and the natural-log lse. It honours the strides it
// is given, the bottom-right causal/window masks, GQA (h / group) and fully masked rows.
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
  caps->ops = NUMPROBE_OP_ATTENTION_FORWARD;
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

NUMPROBE_PLUGIN_EXPORT const char* numprobe_kernel_last_error(void) { return g_last_error; }

}  // extern "C"
