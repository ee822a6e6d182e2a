#pragma once
// Forward attention on inputs already in the dtype's 16-bit patterns, with optional device
// residency across calls: a drift sweep (batch 1) uploads Q/K/V of its longest case once and
// every shorter point reads the first T rows of Q and S rows of K/V from the same device
// buffers (the inputs of a shorter case are the prefix of a longer one's). Only the requested
// rows of O and LSE come back. Plain C++ (no vendor headers), like gpu_api.hpp.
#include <cstdint>

#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/gpu_api.hpp"

namespace numprobe::gpu {

// Device copies kept across calls; owned by the caller, filled and released by the backend
// that ran the call (release frees the device memory).
class resident_inputs {
 public:
  resident_inputs() = default;
  resident_inputs(const resident_inputs&) = delete;
  resident_inputs& operator=(const resident_inputs&) = delete;
  ~resident_inputs() { reset(); }
  void reset() {
    if (release) release(state);
    state = nullptr;
    release = nullptr;
  }
  void* state = nullptr;
  void (*release)(void*) = nullptr;
};

struct resident_request {
  // bf16 or fp16 bit patterns (attention_request::fp16 says which): Q [q_rows, Hq, D] and
  // K, V [kv_rows, Hkv, D] with q_rows >= B*T and kv_rows >= B*S; rows beyond the case are
  // allowed only with batch 1 (a longer case whose prefix this case is).
  const std::uint16_t* q = nullptr;
  const std::uint16_t* k = nullptr;
  const std::uint16_t* v = nullptr;
  std::int64_t q_rows = 0, kv_rows = 0;
  // With a cache: the device copies are reused while (q, k, v, rows, generation) match what
  // was uploaded; the caller bumps generation whenever the arrays behind the pointers change.
  resident_inputs* cache = nullptr;
  std::uint64_t generation = 0;
  // Set: the kernel is launched through this plugin-ABI entry of the built-in kernel table
  // (builtin_kernel_table.hpp) on numprobe_attention_params over the same device buffers, with
  // attention_request::faults and the path's tile as the variant; the upload, poisoning, timing
  // and row gathering around it are unchanged. Null: dispatch_flash directly.
  numprobe_attention_forward_variant_fn abi_forward = nullptr;
};

// Timing of the last call, for the providers' metadata (seconds, host clock; kernel: events).
struct resident_timing {
  double upload_s = 0.0, kernel_ms = 0.0, fetch_s = 0.0;
  bool uploaded = false;  // false: the cached device copies were reused
};

struct resident_api {
  const char* vendor;
  // attention_request's q/k/v/rows fields other than the float pointers apply (rows: the flat
  // rows b*T + t to return). Throws as backend_api::attention_forward does.
  attention_result (*forward)(const attention_request& r, const resident_request& in,
                              resident_timing* timing);
};

[[nodiscard]] const resident_api& cuda_resident_api();
[[nodiscard]] const resident_api& hip_resident_api();

}  // namespace numprobe::gpu
