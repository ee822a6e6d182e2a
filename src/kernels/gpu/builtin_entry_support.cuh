#pragma once
// What the entries of the built-in kernel table share (builtin_kernel_table.cu: the forward and
// the table; builtin_decode_entry.cu: the split-KV decode): the refusal type, the layout checks,
// stream-ordered scratch and the ABI boundary (guarded_call) with its per-thread last error.
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/gpu_check.cuh"
#include "src/kernels/gpu/platform.cuh"

namespace numprobe::gpu::plugin {

#if NUMPROBE_GPU_HIP
inline constexpr bool k_hip = true;
#else
inline constexpr bool k_hip = false;
#endif
// Device pointers of this vendor's runtime.
inline constexpr int k_memory = k_hip ? NUMPROBE_MEMORY_HIP : NUMPROBE_MEMORY_CUDA;

// A refusal of the ABI layer itself: its status and message, no numprobe exception behind it.
struct refused {
  int status;
  std::string what;
};

// The message and exception of the calling thread's last non-zero status (builtin_kernel_table.cu).
extern thread_local std::string g_last_error;
extern thread_local std::exception_ptr g_last_exception;

inline bool dense(const numprobe_tensor& t, std::initializer_list<std::int64_t> shape) {
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

inline attention_mask to_mask(int m) {
  switch (m) {
    case NUMPROBE_MASK_NONE: return attention_mask::m_none;
    case NUMPROBE_MASK_CAUSAL: return attention_mask::m_causal;
    case NUMPROBE_MASK_CAUSAL_TOP_LEFT: return attention_mask::m_causal_top_left;
    case NUMPROBE_MASK_WINDOW: return attention_mask::m_window;
    default: throw refused{NUMPROBE_STATUS_UNSUPPORTED, "unknown mask " + std::to_string(m)};
  }
}

inline void require_memory(int memory) {
  if (memory != k_memory)
    throw refused{NUMPROBE_STATUS_INVALID, k_hip
                                               ? "this plugin takes HIP device pointers (memory = hip)"
                                               : "this plugin takes CUDA device pointers (memory = cuda)"};
}

// Stream-ordered device scratch, freed on the stream (also on an exception); none for 0 bytes.
struct scratch {
  void* ptr = nullptr;
  platform::stream_t stream;
  scratch(std::size_t bytes, platform::stream_t s) : stream(s) {
    if (bytes > 0) NUMPROBE_GPU_CHECK(MallocAsync, &ptr, bytes, s);
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

// The split-KV decode entries (builtin_decode_entry.cu).
int attention_decode(const numprobe_decode_params* p);
int attention_decode_variant(const numprobe_decode_params* p, const numprobe_decode_variant* v);

}  // namespace numprobe::gpu::plugin
