#pragma once
// One loaded kernel plugin (numprobe/kernel_abi.h) and one call into it; or a kernel library
// linked into numprobe, given as its table of the same functions (the built-in GPU kernels). The same code runs in
// numprobe's process (`plugin-inproc:PATH`) and in the plugin worker process (`plugin:PATH`,
// plugin_worker.hpp): loading checks the ABI version and the required symbols; a call stages
// device memory for CUDA-memory plugins. Every refusal names the plugin file and the function.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "numprobe/kernel_abi.h"

namespace numprobe::gpu {
struct device_memory_api;
}

namespace numprobe::plugin {

// The capabilities with their strings copied out of the plugin (they outlive a worker).
struct capabilities {
  numprobe_capabilities caps{};  // name and description are null here: use the strings below
  std::string name;
  std::string description;
};

// A buffer the call's tensors point into. Inputs are copied to the device for a CUDA-memory
// plugin; outputs are poisoned there (0xFF bytes: NaN in every float dtype) and copied back.
struct region {
  void* host = nullptr;
  std::size_t bytes = 0;
  bool output = false;
};

// One ABI call: numprobe_attention_forward with `forward`, or numprobe_attention_decode once
// per element of `decode` (stopping at the first non-zero status).
struct call {
  bool is_decode = false;
  numprobe_attention_params forward{};
  std::vector<numprobe_decode_params> decode;
  std::vector<region> regions;
};

// Applies f to every tensor of the call (rebasing data pointers: host to device, or to and
// from offsets in the worker's shared file).
template <class F>
void for_each_tensor(call& c, F&& f) {
  if (!c.is_decode) {
    for (numprobe_tensor* t : {&c.forward.q, &c.forward.k, &c.forward.v, &c.forward.o, &c.forward.lse}) f(*t);
  } else {
    for (auto& p : c.decode)
      for (numprobe_tensor* t : {&p.q, &p.k, &p.v, &p.seq_lens, &p.o, &p.lse}) f(*t);
  }
}

struct call_result {
  int status = NUMPROBE_STATUS_OK;
  std::int64_t failed_index = 0;  // decode: the params element that failed
  std::string message;            // numprobe_kernel_last_error() after a failure
};

class library {
 public:
  // dlopen()s and checks the plugin; throws backend errors placed at "plugin PATH: FUNCTION".
  library(std::string path, int device);
  // A kernel library linked into numprobe (the built-in GPU kernels' table,
  // src/kernels/gpu/builtin_kernel_table.hpp): no dlopen, the same checks of the version, the
  // required entries and the capabilities; `name` stands for PATH in every refusal.
  library(const numprobe_kernel_table& table, std::string name, int device);
  ~library();
  library(const library&) = delete;
  library& operator=(const library&) = delete;

  [[nodiscard]] const capabilities& caps() const { return m_caps; }
  // Runs the call (host pointers in `c`; staged to the device when the plugin wants CUDA memory).
  // Outputs are written into the regions' host buffers when the status is OK.
  [[nodiscard]] call_result invoke(call& c);
  // numprobe_attention_forward_variant; null unless the capabilities say NUMPROBE_FEATURE_VARIANTS.
  [[nodiscard]] numprobe_attention_forward_variant_fn forward_variant() const { return m_forward_variant; }
  // numprobe_attention_decode_variant; null unless the capabilities say
  // NUMPROBE_FEATURE_DECODE_VARIANTS (a table must then reach that entry: see table_entries).
  [[nodiscard]] numprobe_attention_decode_variant_fn decode_variant() const { return m_decode_variant; }
  // numprobe_kernel_last_error; null when not exported.
  [[nodiscard]] numprobe_kernel_last_error_fn last_error() const { return m_last_error; }

 private:
  [[nodiscard]] std::string place(const char* fn = nullptr) const;
  void load();
  template <class F>
  F symbol(const char* fn, bool required);
  // A device-memory plugin: numprobe's stream and staging on `dm` (a gpu::device_memory_api).
  void use_device_memory(const gpu::device_memory_api& dm, const char* vendor);

  std::string m_path;
  int m_device = 0;
  void* m_handle = nullptr;
  const numprobe_kernel_table* m_table = nullptr;  // the linked-in form (no m_handle)
  void* m_stream = nullptr;
  const void* m_dm = nullptr;  // gpu::device_memory_api for CUDA-memory plugins
  capabilities m_caps;
  numprobe_attention_forward_fn m_forward = nullptr;
  numprobe_attention_decode_fn m_decode = nullptr;
  numprobe_kernel_last_error_fn m_last_error = nullptr;
  numprobe_attention_forward_variant_fn m_forward_variant = nullptr;
  numprobe_attention_decode_variant_fn m_decode_variant = nullptr;
};

// Sizes of numprobe_kernel_table within ABI version 1: the first table (up to forward_variant)
// and this numprobe's (with the appended decode_variant). A linked-in table's struct_size must
// be one of them or larger (a later numprobe's table; the entries past ours are not read).
inline constexpr std::size_t k_kernel_table_v1_size = offsetof(numprobe_kernel_table, decode_variant);
static_assert(k_kernel_table_v1_size == offsetof(numprobe_kernel_table, forward_variant) + sizeof(void*),
              "decode_variant must follow the first version-1 table's last entry");

}  // namespace numprobe::plugin
