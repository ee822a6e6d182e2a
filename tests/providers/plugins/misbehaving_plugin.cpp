// A test plugin that misbehaves on request, to prove plugin isolation (issue 15): it computes
// plain float attention (masks none and causal, LSE), unless $NUMPROBE_TEST_MISBEHAVE says
//   exit   call exit(0) inside numprobe_attention_forward
//   segv   write through a null pointer          abort  call abort()
//   loop   never return                          noisy  print ANSI codes, a CR progress bar
//   status return FAILED with a last-error text full of control bytes and invalid UTF-8
// and, with $NUMPROBE_TEST_MISBEHAVE_SEQ=N, misbehaves only for cases with S = N (a drift
// sweep must go on past that point). "noisy" also prints to stdout, which in the worker must
// reach the log, not the protocol.
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "numprobe/kernel_abi.h"

namespace {

const char* g_last_error = "";

bool misbehave_here(int64_t seq) {
  const char* at = std::getenv("NUMPROBE_TEST_MISBEHAVE_SEQ");
  return !at || !*at || std::atoll(at) == seq;
}

// Returns a status, or does not return at all.
int misbehave(int64_t seq) {
  const char* how = std::getenv("NUMPROBE_TEST_MISBEHAVE");
  if (!how || !*how || !misbehave_here(seq)) return -1;
  if (!std::strcmp(how, "exit")) std::exit(0);
  if (!std::strcmp(how, "segv")) {
    volatile int* p = nullptr;
    *p = 1;
  }
  if (!std::strcmp(how, "abort")) std::abort();
  if (!std::strcmp(how, "loop"))
    for (volatile unsigned long i = 0;; i = i + 1) {}
  if (!std::strcmp(how, "noisy")) {
    std::printf("OK\nERR fake protocol line from the plugin's stdout\n");
    std::fflush(stdout);
    std::fprintf(stderr, "\x1b[31mred\x1b[0m progress 10%%\r progress 100%%\n");
    std::fprintf(stderr, "bad bytes \xff\xfe and \x07 bell\x1b]0;title\x07 end\n");
    std::fflush(stderr);
    std::raise(SIGSEGV);
  }
  if (!std::strcmp(how, "status")) {
    g_last_error = "\x1b[2Jcleared\rscreen \xc3\x28 bad\nsecond line";
    return NUMPROBE_STATUS_FAILED;
  }
  return -1;
}

}  // namespace

extern "C" {

NUMPROBE_PLUGIN_EXPORT uint32_t numprobe_kernel_abi_version(void) { return NUMPROBE_KERNEL_ABI_VERSION; }

NUMPROBE_PLUGIN_EXPORT int numprobe_kernel_capabilities(numprobe_capabilities* caps) {
  caps->abi_version = NUMPROBE_KERNEL_ABI_VERSION;
  caps->name = "misbehaving";
  caps->description = "test plugin: float attention, or a crash on request";
  caps->ops = NUMPROBE_OP_ATTENTION_FORWARD;
  caps->features = NUMPROBE_FEATURE_LSE | NUMPROBE_FEATURE_BATCH;
  caps->input_dtypes = 1u << NUMPROBE_DTYPE_F32;
  caps->output_dtypes = 1u << NUMPROBE_DTYPE_F32;
  caps->masks = (1u << NUMPROBE_MASK_NONE) | (1u << NUMPROBE_MASK_CAUSAL);
  caps->memory = NUMPROBE_MEMORY_HOST;
  return NUMPROBE_STATUS_OK;
}

NUMPROBE_PLUGIN_EXPORT const char* numprobe_kernel_last_error(void) { return g_last_error; }

NUMPROBE_PLUGIN_EXPORT int numprobe_attention_forward(const numprobe_attention_params* p) {
  if (const int s = misbehave(p->seq); s >= 0) return s;
  const int64_t group = p->heads / p->kv_heads;
  std::vector<float> w(static_cast<std::size_t>(p->seq));
  for (int64_t b = 0; b < p->batch; ++b)
    for (int64_t t = 0; t < p->queries; ++t)
      for (int64_t h = 0; h < p->heads; ++h) {
        const int64_t row = b * p->queries + t;
        const float* q = static_cast<const float*>(p->q.data) + row * p->q.strides[0] + h * p->q.strides[1];
        float* o = static_cast<float*>(p->o.data) + row * p->o.strides[0] + h * p->o.strides[1];
        const int64_t last = p->mask == NUMPROBE_MASK_CAUSAL ? p->seq - p->queries + t : p->seq - 1;
        float m = -std::numeric_limits<float>::infinity(), l = 0;
        for (int64_t j = 0; j <= last && j < p->seq; ++j) {
          const float* k = static_cast<const float*>(p->k.data) + (b * p->seq + j) * p->k.strides[0] +
                           (h / group) * p->k.strides[1];
          float s = 0;
          for (int64_t d = 0; d < p->head_dim; ++d) s += q[d] * k[d];
          w[static_cast<std::size_t>(j)] = s * static_cast<float>(p->scale);
          m = std::fmax(m, w[static_cast<std::size_t>(j)]);
        }
        for (int64_t d = 0; d < p->head_dim; ++d) o[d] = 0;
        for (int64_t j = 0; j <= last && j < p->seq; ++j) {
          const float e = std::exp(w[static_cast<std::size_t>(j)] - m);
          l += e;
          const float* v = static_cast<const float*>(p->v.data) + (b * p->seq + j) * p->v.strides[0] +
                           (h / group) * p->v.strides[1];
          for (int64_t d = 0; d < p->head_dim; ++d) o[d] += e * v[d];
        }
        for (int64_t d = 0; d < p->head_dim; ++d) o[d] = l > 0 ? o[d] / l : 0.f;
        if (p->lse.data)
          static_cast<float*>(p->lse.data)[row * p->lse.strides[0] + h * p->lse.strides[1]] =
              l > 0 ? m + std::log(l) : -std::numeric_limits<float>::infinity();
      }
  return NUMPROBE_STATUS_OK;
}

}  // extern "C"
