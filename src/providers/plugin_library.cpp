#include "src/providers/plugin_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "numprobe/base/error.hpp"
#include "src/core/quoted_text.hpp"
#if NUMPROBE_HAVE_CUDA || NUMPROBE_HAVE_HIP
#include "src/kernels/gpu/gpu_api.hpp"
#endif

namespace numprobe::plugin {

library::library(std::string path, int device) : m_path(std::move(path)), m_device(device) {
  dlerror();
  m_handle = ::dlopen(m_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m_handle) {
    const char* e = dlerror();
    throw_backend_error(place(), fmt::format("cannot load: {}", sanitize_quoted(e ? e : "dlopen failed")));
  }
  try {
    load();
  } catch (...) {
    ::dlclose(m_handle);
    m_handle = nullptr;
    throw;
  }
}

library::library(const numprobe_kernel_table& table, std::string name, int device)
    : m_path(std::move(name)), m_device(device), m_table(&table) {
  // Entries are appended within version 1: a table of the first size lacks decode_variant
  // (symbol() does not read it); a size between two known ones is no table numprobe knows.
  if (table.struct_size < k_kernel_table_v1_size)
    throw_backend_error(place(), "the kernel table is smaller than this numprobe's numprobe_kernel_table");
  if (table.struct_size != k_kernel_table_v1_size && table.struct_size < sizeof(numprobe_kernel_table))
    throw_backend_error(place(), fmt::format("the kernel table ({} bytes) is smaller than this numprobe's "
                                             "numprobe_kernel_table ({} bytes) and is not the table "
                                             "before decode_variant ({} bytes)",
                                             table.struct_size, sizeof(numprobe_kernel_table),
                                             k_kernel_table_v1_size));
  load();
}

library::~library() {
#if NUMPROBE_HAVE_CUDA || NUMPROBE_HAVE_HIP
  if (m_dm && m_stream) static_cast<const gpu::device_memory_api*>(m_dm)->destroy_stream(m_stream);
#endif
  if (m_handle) ::dlclose(m_handle);
}

std::string library::place(const char* fn) const {
  return fn ? fmt::format("plugin {}: {}", m_path, fn) : fmt::format("plugin {}", m_path);
}

template <class F>
F library::symbol(const char* fn, bool required) {
  void* s = nullptr;
  if (m_table) {
    // The table's entry of that export name; an appended entry only when struct_size has it.
    const numprobe_kernel_table& t = *m_table;
    const bool has_decode_variant = t.struct_size >= sizeof(numprobe_kernel_table);
    const std::pair<const char*, void*> entries[] = {
        {"numprobe_kernel_abi_version", reinterpret_cast<void*>(t.abi_version)},
        {"numprobe_kernel_capabilities", reinterpret_cast<void*>(t.capabilities)},
        {"numprobe_attention_forward", reinterpret_cast<void*>(t.attention_forward)},
        {"numprobe_attention_decode", reinterpret_cast<void*>(t.attention_decode)},
        {"numprobe_quantize", reinterpret_cast<void*>(t.quantize)},
        {"numprobe_kernel_last_error", reinterpret_cast<void*>(t.last_error)},
        {"numprobe_attention_forward_variant", reinterpret_cast<void*>(t.forward_variant)},
        {"numprobe_attention_decode_variant",
         has_decode_variant ? reinterpret_cast<void*>(t.decode_variant) : nullptr}};
    for (const auto& [name, ptr] : entries)
      if (std::strcmp(name, fn) == 0) s = ptr;
  } else {
    dlerror();
    s = ::dlsym(m_handle, fn);
  }
  if (!s && required) throw_backend_error(place(fn), "the plugin does not export this required function");
  return reinterpret_cast<F>(s);
}

void library::load() {
  auto version = symbol<numprobe_kernel_abi_version_fn>("numprobe_kernel_abi_version", true);
  const std::uint32_t v = version();
  if (v != NUMPROBE_KERNEL_ABI_VERSION)
    throw_backend_error(place("numprobe_kernel_abi_version"),
                        fmt::format("the plugin was built for kernel ABI version {}, this numprobe "
                                    "speaks version {}; rebuild it against this numprobe's "
                                    "numprobe/kernel_abi.h",
                                    v, NUMPROBE_KERNEL_ABI_VERSION));
  auto caps_fn = symbol<numprobe_kernel_capabilities_fn>("numprobe_kernel_capabilities", true);
  numprobe_capabilities& caps = m_caps.caps;
  caps.struct_size = sizeof(caps);
  if (const int s = caps_fn(&caps); s != NUMPROBE_STATUS_OK)
    throw_backend_error(place("numprobe_kernel_capabilities"), fmt::format("returned status {}", s));
  // The strings live in the plugin's storage: copy them, and never pass the pointers on.
  m_caps.name = caps.name ? sanitize_quoted(caps.name) : "";
  m_caps.description = caps.description ? sanitize_quoted(caps.description) : "";
  caps.name = caps.description = nullptr;
  if (caps.abi_version != NUMPROBE_KERNEL_ABI_VERSION)
    throw_backend_error(place("numprobe_kernel_capabilities"),
                        fmt::format("reports ABI version {}, numprobe speaks {}", caps.abi_version,
                                    NUMPROBE_KERNEL_ABI_VERSION));
  m_last_error = symbol<numprobe_kernel_last_error_fn>("numprobe_kernel_last_error", false);
  if (!(caps.ops & NUMPROBE_OP_ATTENTION_FORWARD))
    throw_backend_error(place("numprobe_kernel_capabilities"),
                        "the plugin does not offer attention forward (NUMPROBE_OP_ATTENTION_FORWARD)");
  m_forward = symbol<numprobe_attention_forward_fn>("numprobe_attention_forward", true);
  // Optional ops must be exported when advertised.
  if (caps.ops & NUMPROBE_OP_DECODE)
    m_decode = symbol<numprobe_attention_decode_fn>("numprobe_attention_decode", true);
  if (caps.ops & NUMPROBE_OP_QUANTIZE) (void)symbol<numprobe_quantize_fn>("numprobe_quantize", true);
  if (caps.features & NUMPROBE_FEATURE_VARIANTS)
    m_forward_variant = symbol<numprobe_attention_forward_variant_fn>("numprobe_attention_forward_variant", true);
  if (caps.features & NUMPROBE_FEATURE_DECODE_VARIANTS) {
    if (!(caps.ops & NUMPROBE_OP_DECODE))
      throw_backend_error(place("numprobe_kernel_capabilities"),
                          "NUMPROBE_FEATURE_DECODE_VARIANTS without NUMPROBE_OP_DECODE");
    m_decode_variant = symbol<numprobe_attention_decode_variant_fn>("numprobe_attention_decode_variant", true);
  }
  if (caps.memory == NUMPROBE_MEMORY_CUDA) {
#if NUMPROBE_HAVE_CUDA
    use_device_memory(gpu::cuda_device_memory_api(), "CUDA");
#else
    throw_backend_error(place("numprobe_kernel_capabilities"),
                        "the plugin wants CUDA device memory; no CUDA backend compiled into this numprobe");
#endif
#if NUMPROBE_HAVE_HIP
  } else if (caps.memory == NUMPROBE_MEMORY_HIP) {
    use_device_memory(gpu::hip_device_memory_api(), "HIP");
#endif
  } else if (caps.memory != NUMPROBE_MEMORY_HOST) {
    throw_backend_error(place("numprobe_kernel_capabilities"),
                        fmt::format("the plugin wants {} memory; this numprobe passes host or CUDA "
                                    "device pointers only",
                                    caps.memory == NUMPROBE_MEMORY_HIP ? "HIP device"
                                                                       : fmt::format("memory#{}", caps.memory)));
  }
}

#if NUMPROBE_HAVE_CUDA || NUMPROBE_HAVE_HIP
void library::use_device_memory(const gpu::device_memory_api& dm, const char* vendor) {
  if (dm.device_count() == 0)
    throw_backend_error(place("numprobe_kernel_capabilities"),
                        fmt::format("the plugin wants {} device memory and no {} device is visible", vendor, vendor));
  m_dm = &dm;
  m_stream = dm.create_stream(m_device);
}
#endif

call_result library::invoke(call& c) {
  call_result r;
  const char* fn = c.is_decode ? "numprobe_attention_decode" : "numprobe_attention_forward";
  if (c.is_decode && !m_decode) throw_backend_error(place(fn), "the plugin does not offer decode");
  const auto run_all = [&](void* stream) {
    if (!c.is_decode) {
      c.forward.stream = stream;
      r.status = m_forward(&c.forward);
      return;
    }
    for (std::size_t i = 0; i < c.decode.size(); ++i) {
      c.decode[i].stream = stream;
      r.status = m_decode(&c.decode[i]);
      r.failed_index = static_cast<std::int64_t>(i);
      if (r.status != NUMPROBE_STATUS_OK) break;
    }
  };
  if (m_caps.caps.memory == NUMPROBE_MEMORY_HOST) {
    run_all(nullptr);
  } else {
#if NUMPROBE_HAVE_CUDA || NUMPROBE_HAVE_HIP
    // numprobe allocates device buffers, copies the inputs, poisons the outputs, passes device
    // pointers and its own stream, synchronises that stream and reads back.
    const auto* dm = static_cast<const gpu::device_memory_api*>(m_dm);
    struct device_buffer {
      const gpu::device_memory_api* dm;
      void* ptr;
      device_buffer(const gpu::device_memory_api* d, int dev, std::size_t n) : dm(d), ptr(d->alloc(dev, n)) {}
      device_buffer(const device_buffer&) = delete;
      device_buffer& operator=(const device_buffer&) = delete;
      ~device_buffer() { dm->release(ptr); }
    };
    std::vector<std::unique_ptr<device_buffer>> bufs;
    for (const region& g : c.regions) {
      bufs.push_back(std::make_unique<device_buffer>(dm, m_device, g.bytes));
      if (g.output) dm->fill(bufs.back()->ptr, 0xFF, g.bytes);
      else dm->copy_to_device(bufs.back()->ptr, g.host, g.bytes);
    }
    for_each_tensor(c, [&](numprobe_tensor& t) {
      if (!t.data) return;
      const auto* p = static_cast<const unsigned char*>(t.data);
      // Strictly inside a region first: in the worker the regions sit back to back in one shared
      // mapping, so a tensor starting one region on is also "one past the end" of the previous
      // one (matching that end sent the plugin past its device buffer). The end itself only for
      // an empty tensor.
      for (const bool at_end : {false, true})
        for (std::size_t i = 0; i < c.regions.size(); ++i) {
          const auto* h = static_cast<const unsigned char*>(c.regions[i].host);
          const auto* e = h + c.regions[i].bytes;
          if (p >= h && (at_end ? p == e : p < e)) {
            t.data = static_cast<unsigned char*>(bufs[i]->ptr) + (p - h);
            return;
          }
        }
      throw_backend_error(place(fn), "internal error: a tensor outside every staged buffer");
    });
    run_all(m_stream);
    try {
      dm->synchronize(m_stream);
    } catch (const error& e) {
      throw_backend_error(place(fn), fmt::format("the plugin's work on numprobe's stream failed: {}", e.what()));
    }
    if (r.status == NUMPROBE_STATUS_OK)
      for (std::size_t i = 0; i < c.regions.size(); ++i)
        if (c.regions[i].output) dm->copy_to_host(c.regions[i].host, bufs[i]->ptr, c.regions[i].bytes);
#else
    throw_backend_error(place(), "no CUDA backend compiled");
#endif
  }
  if (r.status != NUMPROBE_STATUS_OK && m_last_error)
    if (const char* msg = m_last_error(); msg && *msg) r.message = sanitize_quoted(msg);
  return r;
}

}  // namespace numprobe::plugin
